# The Go command the wrapper modules are built with (sourced by cluster/build.sh, never run).
#
# Any Go of 1.21 or newer will do: the go command switches to the exact toolchain a module's go.mod
# names (GOTOOLCHAIN=auto), fetching it from the Go module proxy as a module like any other. When
# no such Go is on PATH, Debian 12's bookworm-backports gives one through apt (golang-1.23-go;
# bookworm's own golang is 1.19, too old to switch). Debian's Go sets GOTOOLCHAIN=local in its
# go.env, so it is set here explicitly.

GO_BACKPORT_PACKAGE=golang-1.23-go
GO_BACKPORT_DIR=/usr/lib/go-1.23/bin
GO_BACKPORTS_SOURCE=/etc/apt/sources.list.d/kubevirt-rs-bookworm-backports.sources

# Whether `go` on PATH can switch toolchains (1.21 or newer).
go_can_switch() {
    command -v go >/dev/null || return 1
    local version
    version=$(go env GOVERSION 2>/dev/null) || return 1
    version=${version#go}
    local major=${version%%.*} rest=${version#*.}
    local minor=${rest%%.*}
    [ "$major" -gt 1 ] || { [ "$major" -eq 1 ] && [ "${minor%%[!0-9]*}" -ge 21 ]; }
}

# Puts a Go that can switch toolchains on PATH, installing Debian's backport when there is none.
ensure_go() {
    export GOTOOLCHAIN=auto
    go_can_switch && return 0
    if [ -x "$GO_BACKPORT_DIR/go" ]; then
        export PATH="$GO_BACKPORT_DIR:$PATH"
        go_can_switch && return 0
    fi
    [ "$(id -u)" = 0 ] || die "Go 1.21 or newer is missing: run as root to install $GO_BACKPORT_PACKAGE"
    local codename
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ "$codename" = bookworm ] || die "Go 1.21 or newer is missing: install it (on Debian 12 the scripts use $GO_BACKPORT_PACKAGE)"
    say "installing $GO_BACKPORT_PACKAGE from bookworm-backports"
    if [ ! -f "$GO_BACKPORTS_SOURCE" ]; then
        cat >"$GO_BACKPORTS_SOURCE" <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$GO_BACKPORT_PACKAGE" >/dev/null \
        || die "installing $GO_BACKPORT_PACKAGE failed"
    export PATH="$GO_BACKPORT_DIR:$PATH"
    go_can_switch || die "$GO_BACKPORT_PACKAGE gives no usable go in $GO_BACKPORT_DIR"
}
