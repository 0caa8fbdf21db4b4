from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from access import signin
from access.oidc.views import SignInCallback, SignInStart
from surfaces import viewer, views
from surfaces.admin.overview import overview_view, try_search_view
from surfaces.api import api
from surfaces.mcp_transport import mcp_endpoint
from surfaces.metrics import metrics_view
from surfaces.protected_resource import protected_resource_metadata

admin.site.site_header = "rag-site administration"
admin.site.site_title = "rag-site admin"
# Throttled sign-in (access/signin.py), also wherever the admin builds its own login view.
admin.site.login_form = signin.AdminSignInForm

urlpatterns = [
    path("", views.search_page, name="search"),
    path("view/skill/<slug:slug>", viewer.view_skill, name="view-skill"),
    path("view/file/<str:root>/<path:path>", viewer.view_file, name="view-file"),
    path("download/file/<str:root>/<path:path>", viewer.download_file, name="download-file"),
    path("view/document/<int:document_id>", viewer.view_document, name="view-document"),
    path("download/document/<int:document_id>", viewer.download_document, name="download-document"),
    path("accounts/login/", signin.login_view, name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Single sign-on (access/oidc/): 404 while RAG_OIDC_CLIENT_ID is unset.
    path("oidc/authenticate/", SignInStart.as_view(), name="oidc-authenticate"),
    path("oidc/callback/", SignInCallback.as_view(), name="oidc-callback"),
    path("admin/overview/", admin.site.admin_view(overview_view), name="admin-overview"),
    path("admin/try-search/", admin.site.admin_view(try_search_view), name="admin-try-search"),
    # Before admin.site.urls, which has its own: a refused sign-in answers 429 or 503 with Retry-After.
    path("admin/login/", signin.throttled(admin.site.login)),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("mcp", mcp_endpoint, name="mcp"),  # the MCP server (Streamable HTTP), for agents
    # Clients are configured with or without the slash, and a POST cannot follow a redirect: serve both.
    path("mcp/", mcp_endpoint),
    # RFC 9728: a bearer key, no authorization server (what an MCP client reads after a 401 before trying OAuth).
    path(".well-known/oauth-protected-resource", protected_resource_metadata, name="protected-resource"),
    path(".well-known/oauth-protected-resource/mcp", protected_resource_metadata, {"resource_path": "mcp"}),
    path("metrics", metrics_view, name="metrics"),  # Prometheus; 404 until RAG_METRICS_TOKEN is set
]

handler400 = "surfaces.handlers.bad_request"
handler404 = "surfaces.handlers.not_found"
handler500 = "surfaces.handlers.server_error"
