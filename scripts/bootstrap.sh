#!/usr/bin/env bash
# Makes sure this machine has what the stack needs to build and test: a Swift toolchain, PostgreSQL's server
# binaries (Debian's postgresql package; its postgresql-NN also holds pgbench, the baseline of
# `sync-bench push --baseline pgbench`), nginx (the load balancer of `make chaos` and its test), gnuplot (the
# charts of `make bench`), the Debian -dev packages SwiftPM links against, docker-compose (used only to
# validate docker-compose.yml; no Docker engine is needed), Chromium with its WebDriver (the dashboard's test in a
# real browser), and from PyPI Selenium (which drives it) and schemathesis (the API fuzzer of the tests).
# Installs what is missing with apt-get when it can, otherwise prints the one command that would.
set -euo pipefail

# The Python packages, from PyPI with pip, each only when it cannot be imported. A machine without pip or PyPI
# still builds and tests: a test that needs a package it lacks says it is skipped, and why.
python_packages=(schemathesis selenium)
missing_python=()
for package in "${python_packages[@]}"; do
    python3 -c "import $package" 2>/dev/null || missing_python+=("$package")
done
if [ ${#missing_python[@]} -gt 0 ]; then
    echo "bootstrap: installing ${missing_python[*]} (pip)" >&2
    # A system Python that pip may not change (PEP 668) is told it may: these are the tests' packages.
    if ! python3 -m pip install --quiet "${missing_python[@]}" >/dev/null 2>&1 \
        && ! python3 -m pip install --quiet --break-system-packages "${missing_python[@]}" >/dev/null 2>&1; then
        echo "bootstrap: could not install ${missing_python[*]}; the tests that use them will be skipped. Run:" >&2
        echo "  python3 -m pip install ${missing_python[*]}" >&2
    fi
fi

packages=(libsqlite3-dev libpq-dev libcurl4-openssl-dev libssl-dev zlib1g-dev postgresql nginx gnuplot-nox docker-compose
    chromium chromium-driver python3-cryptography)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

# The minimum toolchain: hummingbird, jwt-kit and async-http-client declare Swift tools 6.2, and so does every
# manifest of this repository.
minimum_swift=6.2
if ! command -v swift >/dev/null 2>&1; then
    echo "bootstrap: no Swift toolchain on PATH; install Swift $minimum_swift or later from swift.org first." >&2
    exit 1
fi
swift_version="$(swift --version 2>&1 | sed -n 's/.*Swift version \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -1)"
if [ -z "$swift_version" ]; then
    echo "bootstrap: cannot read the version of $(command -v swift); Swift $minimum_swift or later is needed." >&2
    exit 1
fi
if [ "$(printf '%s\n%s\n' "$minimum_swift" "$swift_version" | sort -V | head -1)" != "$minimum_swift" ]; then
    echo "bootstrap: Swift $swift_version is too old: this repository needs Swift $minimum_swift or later." >&2
    echo "  Install it from https://www.swift.org/install/linux/ (or with swiftly: swiftly install $minimum_swift)" >&2
    echo "  and put its usr/bin first on PATH, then run make again." >&2
    exit 1
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

command="apt-get update -qq && apt-get install -qq -y --no-install-recommends ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: missing ${missing[*]}; this is not a Debian-like system: install their equivalents." >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        command="sudo sh -c '$command'"
    else
        echo "bootstrap: missing ${missing[*]}. Run:" >&2
        echo "  sudo sh -c '$command'" >&2
        exit 1
    fi
fi
echo "bootstrap: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! sh -c "$command" >/dev/null; then
    echo "bootstrap: apt-get failed. Run this yourself, then retry:" >&2
    echo "  $command" >&2
    exit 1
fi
