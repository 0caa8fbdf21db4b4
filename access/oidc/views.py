"""The two single sign-on pages: /oidc/authenticate/ sends a person to the provider, /oidc/callback/ signs them in.

Both answer 404 while single sign-on is off. A provider that cannot be
reached, a refused sign-in or a callback whose state is not this browser's
all end on the login page with a message, never a server error.
"""

import logging

from django.contrib import messages
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from access.oidc.backend import library_setting
from access.oidc.config import ProviderUnavailable, endpoints, oidc_config

log = logging.getLogger(__name__)

FAILED = "Single sign-on did not sign you in. Try again, or use your username and password."


def _back_to_login(request: HttpRequest, message: str) -> HttpResponse:
    messages.error(request, message)
    return HttpResponseRedirect(reverse("login"))


class SignInStart(OIDCAuthenticationRequestView):
    get_settings = staticmethod(library_setting)

    def __init__(self, **kwargs) -> None:
        View.__init__(self, **kwargs)  # the library's reads the endpoints here; ours in get, where errors can be told

    def get(self, request: HttpRequest) -> HttpResponse:
        config = oidc_config()
        if config is None:
            raise Http404("single sign-on is not configured")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = endpoints(config).authorization_endpoint
        except ProviderUnavailable as exc:
            log.warning("single sign-on unavailable: %s", exc)
            return _back_to_login(request, f"{config.provider_name} cannot be reached right now. Try again later.")
        self.OIDC_RP_CLIENT_ID = config.client_id
        return super().get(request)


class SignInCallback(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(library_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        if oidc_config() is None:
            raise Http404("single sign-on is not configured")
        try:
            return super().get(request)
        except SuspiciousOperation as exc:  # a state this browser never started: a forged or replayed callback
            log.warning("single sign-on callback refused: %s", exc)
            return _back_to_login(request, FAILED)

    def login_failure(self) -> HttpResponse:
        return _back_to_login(self.request, FAILED)


def signin_button() -> dict[str, str] | None:
    """What the login page shows beside its form: the provider's name and where the button goes; None when off."""
    config = oidc_config()
    if config is None:
        return None
    return {"name": config.provider_name, "url": reverse("oidc-authenticate")}
