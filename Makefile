# RLark Console: `make run` starts the console, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PORT ?= $(or $(RLARK_PORT),8000)

.PHONY: install run test lint bench clean k8s-build k8s-up k8s-up-real k8s-down local-runtime-deps real-node-deps images

install: $(VENV)/.installed static/vendor/.installed locale-compiled local-runtime-deps real-node-deps

# A root console runs local Workers as subordinate uids (newuidmap/newgidmap from Debian's uidmap), each job in
# a network namespace of its own behind a host guard (iptables).
local-runtime-deps:
	@if [ "$$(id -u)" = 0 ] && { ! command -v newuidmap >/dev/null || ! command -v newgidmap >/dev/null \
	  || ! command -v iptables >/dev/null; } && command -v apt-get >/dev/null; then \
	  echo "installing Debian uidmap and iptables for the local runtime"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq uidmap iptables) \
	  >/dev/null 2>&1 || echo "could not install uidmap and iptables"; fi

# Real test nodes (tools/k8s/nodes.py, images.py): Debian's containerd, runc, CNI plugins, mmdebstrap and podman.
REAL_NODE_PKGS := containerd runc containernetworking-plugins mmdebstrap podman conntrack
real-node-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && { ! command -v containerd >/dev/null \
	  || ! command -v runc >/dev/null || ! [ -x /usr/lib/cni/bridge ] || ! command -v mmdebstrap >/dev/null \
	  || ! command -v podman >/dev/null || ! command -v conntrack >/dev/null; }; then \
	  echo "installing Debian $(REAL_NODE_PKGS) for real test nodes"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(REAL_NODE_PKGS)) \
	  >/dev/null 2>&1 || echo "could not install $(REAL_NODE_PKGS)"; fi

$(VENV)/.installed: requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip "setuptools>=68" wheel
	$(PIP) install -q -r requirements.lock
	$(PIP) install -q --no-deps --no-build-isolation -e .
	touch $@

static/vendor/.installed: package.json
	npm install --no-audit --no-fund --silent
	mkdir -p static/vendor
	cp node_modules/htmx.org/dist/htmx.min.js static/vendor/
	cp node_modules/@xterm/xterm/lib/xterm.js node_modules/@xterm/xterm/css/xterm.css static/vendor/
	cp node_modules/@xterm/addon-fit/lib/addon-fit.js static/vendor/
	cp node_modules/echarts/dist/echarts.min.js static/vendor/
	touch $@

locale-compiled:
	@if command -v msgfmt >/dev/null; then $(PY) manage.py compilemessages -v0 --ignore=.venv --ignore=node_modules; fi

run: install
	$(PY) manage.py migrate --noinput -v0
	$(PY) manage.py seed_demo
	$(PY) manage.py runconsole --port $(PORT)

test: install
	@if { [ ! -x /usr/bin/chromium ] || [ ! -d /usr/share/fonts/opentype/noto ]; } && [ "$$(id -u)" = 0 ] \
	  && command -v apt-get >/dev/null; then echo "installing Debian chromium and CJK fonts for browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk) \
	  >/dev/null 2>&1 || echo "could not install chromium"; fi
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) manage.py makemigrations --check --dry-run -v0
	@bash tools/k8s/build.sh >/dev/null || echo "real Kubernetes control plane not built: its tests (-m k8s_real) will skip"
	@bash tools/k8s/build-node.sh >/dev/null || echo "real-node binaries not built: their tests (-m k8s_nodes) will skip"
	$(VENV)/bin/pytest $(PYTEST_ARGS)

k8s-build:
	bash tools/k8s/build.sh
	bash tools/k8s/build-node.sh

# Images for real nodes, built here with no network inside a build (tools/k8s/images.py); cached by content hash.
images: install
	bash tools/k8s/build-node.sh >/dev/null
	$(PY) -m tools.k8s.images

# A real control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) on 127.0.0.1;
# the last line printed is the admin kubeconfig. `make k8s-down` stops it.
# REAL_NODES=N also joins N real nodes (kubelet + containerd, Pods as real containers on a guarded bridge; the
# demo job needs 2). `make k8s-up-real` is REAL_NODES=2.
k8s-up: install
	$(PY) -m tools.k8s.session up $(if $(REAL_NODES),--real-nodes $(REAL_NODES))

k8s-up-real:
	$(MAKE) k8s-up REAL_NODES=2

k8s-down:
	$(PY) -m tools.k8s.session down

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports

bench: install
	for b in bench/*.py; do [ "$$b" = bench/quick.py ] || $(PY) $$b; done

clean:
	rm -rf $(VENV) node_modules static/vendor var
