from django.apps import AppConfig


class RagSiteConfig(AppConfig):
    # An app only so Django finds rag_site/management/commands (rag_run); no models.
    name = "rag_site"
    verbose_name = "rag-site"
