# Image for the production topology in docker-compose.yml.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm gettext uidmap && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.lock pyproject.toml ./
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
RUN pip install --no-cache-dir --no-deps -e . && make static/vendor/.installed PYTHON=python VENV=/usr/local \
    && python manage.py compilemessages -v0 --ignore=node_modules
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
