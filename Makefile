# kubevirt-rs: `make run` boots the test guest locally, `make test` runs the whole suite.
# Both install what they need first (as root on Debian 12) and can be run again.

SHELL := /bin/bash
CARGO ?= cargo
VMI ?= manifests/examples/vmi-testguest.yaml

# CI builds once from a fresh clone: incremental caches would only double the size of target/.
ifdef CI
export CARGO_INCREMENTAL := 0
endif

.PHONY: all deps guest build run test fmt lint unit crds bench images test-images cluster cluster-down e2e kubernetes

all: build

deps:
	@scripts/install-deps.sh

guest: deps
	@kubevirt-tests/guest/build-testguest.sh

# The shipped binaries only: building the whole workspace would turn on the `testing` feature
# the benchmark programs need, and put the test doubles into them.
build: deps
	$(CARGO) build -p virt-launcher -p virt-handler -p virt-controller -p virt-api -p virtctl -p container-disk -p cdi-apiserver -p cdi-controller -p cdi-importer -p cdi-uploadproxy -p cdi-uploadserver -p cdi-cloner -p hostpath-csi-driver -p hostpath-provisioner-operator -p cdi-operator -p ssp-operator -p virt-template-validator -p virt-operator

run: guest build
	target/debug/virt-launcher run --vmi $(VMI) --force-emulation

fmt:
	$(CARGO) fmt --all --check

# The tiers that need root, a real libvirt and QEMU, network namespaces or the host tools `make deps`
# installs sit behind each crate's `host-tests` feature: plain `cargo test` leaves them out, so a
# contributor's loop runs as any user; `make test` runs them all.
HOST_TESTS := --features cdi-importer/host-tests,cdi-uploadserver/host-tests,hostpath-csi-driver/host-tests,cmd-protocol/host-tests,pod-network/host-tests,domain-xml/host-tests,kubevirt-tests/host-tests,virt-api/host-tests,virt-handler/host-tests,virt-launcher/host-tests

# The second pass lints the shipped crates as the images build them: without the `testing`
# feature that the test crates turn on.
lint:
	$(CARGO) clippy --workspace --all-targets $(HOST_TESTS) -- -D warnings
	$(CARGO) clippy -p kubevirt-api -p pod-network -p virt-launcher -p virt-handler -p virt-controller -p virt-api -p cdi-api -p cdi-apiserver -p cdi-controller -p cdi-importer -p cdi-token -p cdi-uploadproxy -p cdi-uploadserver -p cdi-cloner -p hostpath-csi-driver -p hostpath-provisioner-operator -p cdi-operator -p operator-kit -p virt-template-validator -p ssp-operator -p virt-operator -- -D warnings

# Golden files are compared, never rewritten, whatever the environment says. The kubectl tests
# use the kubectl built with the test cluster's binaries.
unit: kubernetes
	env -u KUBEVIRT_RS_UPDATE_GOLDEN $(CARGO) test --workspace $(HOST_TESTS)

test: guest
	$(MAKE) --no-print-directory fmt lint unit test-images e2e

# The four container images from release binaries (scripts/build-images.sh; docs/install.md).
images:
	scripts/build-images.sh --profile release

# Build the images from the test build and boot the test guest in the launcher image.
test-images: guest
	scripts/test-images.sh

crds:
	$(CARGO) run -q -p kubevirt-api --bin crdgen

bench: guest
	scripts/bench.sh

# A Kubernetes built from upstream (cluster/) with two nodes (NODES=1..9) and cluster DNS, with
# kubevirt-rs installed on it as docs/install.md says; `make cluster-down` removes it. See
# docs/cluster.md.
cluster: guest
	cluster/up.sh

cluster-down:
	cluster/down.sh

# The test cluster's binaries (Kubernetes, etcd, CoreDNS, pause) from upstream's Go modules.
kubernetes:
	cluster/build.sh

# The end-to-end tests on the test cluster (brought up first, and down after unless it ran).
e2e: guest
	env -u KUBEVIRT_RS_UPDATE_GOLDEN scripts/test-cluster.sh
