from django.apps import AppConfig


class SourcesConfig(AppConfig):
    name = "sources"
    verbose_name = "Knowledge sources"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from sources import signals  # noqa: F401 - connects the receivers
        from sources.schedules import schedules_ensure

        post_migrate.connect(schedules_ensure, sender=self, dispatch_uid="sources_schedules")
