"""The ninja routers: one per area, assembled by surfaces.api."""
