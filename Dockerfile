# quotaportal: one image for the web server, Celery worker and beat, and simulated agents.
FROM python:3.13-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
COPY quotaportal ./quotaportal
RUN pip install --no-cache-dir .
COPY . .
RUN QP_SECRET_KEY=build-only python manage.py collectstatic --noinput -v0

RUN useradd --create-home quotaportal && chown -R quotaportal /app
USER quotaportal
EXPOSE 8000
CMD ["gunicorn", "quotaportal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
