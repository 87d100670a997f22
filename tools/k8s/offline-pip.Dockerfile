# An image built with no network (tools/k8s/images.py builds with --network=none): the Python wheels in the
# context's wheels/ were made on the host (pip wheel); requirements.txt names what to install from them.
ARG BASE
FROM ${BASE}
COPY wheels /tmp/wheels
COPY requirements.txt /tmp/requirements.txt
RUN pip install --break-system-packages --no-index --no-cache-dir --find-links /tmp/wheels -r /tmp/requirements.txt \
    && rm -rf /tmp/wheels /tmp/requirements.txt
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PYTHONUNBUFFERED=1
