from django.apps import AppConfig


class SurfacesConfig(AppConfig):
    name = "surfaces"
    verbose_name = "Surfaces"
