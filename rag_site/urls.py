from django.contrib import admin
from django.urls import path

from rag_site.api import api
from retrieval import views

admin.site.site_header = "rag-site administration"
admin.site.site_title = "rag-site admin"

urlpatterns = [
    path("", views.search_page, name="search"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
