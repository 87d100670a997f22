# The network-domain sidecar of Kubernetes Workers (jobs/spec/network_sidecar.py):
#   docker build --target netagent -t rlark-console-netagent:latest .
# Only the agent (domains/netagent.py), asyncssh as pinned in requirements.lock, and iproute2 for `ip tuntap`.
# BASE: python:3.11-slim for real users; the real test nodes (tools/k8s/images.py) build with no network from a
# Debian base that already has iproute2 and the pinned wheels, so neither apt nor pip reaches out.
ARG BASE=python:3.11-slim
FROM ${BASE} AS netagent
RUN command -v ip >/dev/null 2>&1 \
    || { apt-get update && apt-get install -y --no-install-recommends iproute2 && rm -rf /var/lib/apt/lists/*; }
COPY requirements.lock /tmp/requirements.lock
RUN pip install --no-cache-dir $(grep -E '^(asyncssh|cryptography|cffi|pycparser|typing.extensions)==' /tmp/requirements.lock)
WORKDIR /app
COPY domains/__init__.py domains/netagent.py domains/
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["python", "-m", "domains.netagent"]

# Image for the production topology in docker-compose.yml (the last stage: the default target).
FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm gettext uidmap && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.lock pyproject.toml ./
RUN pip install --no-cache-dir -r requirements.lock
COPY . .
RUN pip install --no-cache-dir --no-deps -e . && make static/vendor/.installed PYTHON=python VENV=/usr/local \
    && python manage.py compilemessages -v0 --ignore=node_modules
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
