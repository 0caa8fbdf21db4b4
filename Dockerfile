# rag-site image: one image for web, worker, beat and migrate (docker-compose.yml).

FROM node:20-slim AS assets
WORKDIR /app
COPY package.json package-lock.json ./
# Production packages only (htmx): axe-core is a devDependency of the browser tests.
RUN npm ci --omit=dev --no-audit --no-fund

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 RAG_VAR_DIR=/app/var
# Set TORCH_INDEX_URL to a CPU-only wheel index to keep the image small;
# by default pip takes torch 2.13.0 from PyPI.
ARG TORCH_INDEX_URL=""
RUN pip install --no-cache-dir torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
RUN useradd --create-home --uid 1000 app
WORKDIR /app
COPY pyproject.toml README.md manage.py ./
COPY kernel ./kernel
COPY sources ./sources
COPY access ./access
COPY retrieval ./retrieval
COPY surfaces ./surfaces
COPY rag_site ./rag_site
COPY measure ./measure
COPY templates ./templates
COPY static ./static
RUN pip install --no-cache-dir -e .
COPY --from=assets /app/node_modules ./node_modules
# collectstatic reads settings, which need a DATABASE_URL; it never connects.
RUN DATABASE_URL=postgres://build@localhost/build SECRET_KEY=build-only python manage.py collectstatic --noinput \
    && mkdir -p /app/var && chown -R app /app/var
USER app
EXPOSE 8000
# gthread: a slow client holds one of a worker's threads, not the whole worker.
CMD ["gunicorn", "rag_site.wsgi", "--bind=0.0.0.0:8000", "--workers=3", "--worker-class=gthread", "--threads=4", "--timeout=120", "--config=python:rag_site.gunicorn_hooks"]
