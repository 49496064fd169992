# The Petstore Inventory Service image (docs/deployment.md).
#
#   docker build -t petstore-inventory:1.0.0 .
#   docker run -p 8080:8080 -v petstore:/data petstore-inventory:1.0.0            # SQLite in the /data volume
#   docker exec CONTAINER petstore keys create --plan free --name me              # a key, printed once
#
# One base: NODE_IMAGE, any Node.js 22+ image with npm on Debian (the official one by default; a mirror's, or
# node:22-bookworm-slim, alone). It builds the code, and the runtime is made from it too: /usr/local cut down to the
# node binary (npm, npx, corepack, yarn and Node's C headers, about 90 MB and the packages scanners most often flag,
# stay out of what runs), then copied whole into an empty image, so that what was cut is not shipped in a layer
# underneath. RUNTIME_IMAGE, when given, is the runtime's base instead (a hardened Debian), with NODE_IMAGE's node
# binary copied in; it must be NODE_IMAGE's Debian release, since node links against its C library, and the build
# stops saying so when it is not.
ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=${NODE_IMAGE}

# Build: compile the TypeScript with the dev dependencies.
FROM ${NODE_IMAGE} AS build
# The Debian release the node binary was built for: the runtime must be the same one.
RUN . /etc/os-release && mkdir -p /tmp/petstore-build && echo "${VERSION_CODENAME:?NODE_IMAGE is no Debian image (no VERSION_CODENAME in /etc/os-release)}" > /tmp/petstore-build/debian-release
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# --ignore-scripts: the prepare script would compile before the sources are here (the next RUN does it), and no
# dependency needs an install script (better-sqlite3 ships its binaries in its package).
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY client ./client
RUN npm run build

# Production dependencies only.
FROM ${NODE_IMAGE} AS dependencies
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
  # better-sqlite3 carries its C sources and a binary for every platform: keep only this one's (about 24 MB less).
  && arch=$(node -p 'process.arch') \
  && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
  && find node_modules/better-sqlite3/prebuilds -type f ! -name "linux-${arch}.node" -delete \
  # Source maps and type declarations serve nothing at run time (about 30 MB, most of it the OpenTelemetry SDK's).
  && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete \
  && node -e "require('better-sqlite3')(':memory:').close()"

# The runtime's file system: RUNTIME_IMAGE with nothing under /usr/local but NODE_IMAGE's node binary, and its user.
FROM ${RUNTIME_IMAGE} AS runtime-root
COPY --from=build /usr/local/bin/node /tmp/petstore-build/node
COPY --from=build /tmp/petstore-build/debian-release /tmp/petstore-build/debian-release
RUN node_release=$(cat /tmp/petstore-build/debian-release) \
  && . /etc/os-release \
  && if [ "${VERSION_CODENAME:-}" != "$node_release" ]; then \
       echo "RUNTIME_IMAGE is Debian ${VERSION_CODENAME:-(unknown)} and NODE_IMAGE Debian $node_release: node links against its Debian's C library, so give a RUNTIME_IMAGE of Debian $node_release, or none (the runtime is then made from NODE_IMAGE)" >&2; \
       exit 1; \
     fi \
  # What Node images add under /usr/local and /opt (Debian leaves the directories of /usr/local empty).
  && find /usr/local -mindepth 2 -delete \
  && rm -rf /opt/yarn-* \
  && mv /tmp/petstore-build/node /usr/local/bin/node \
  && rm -rf /tmp/petstore-build \
  && node --version \
  # `petstore` on PATH (docker exec CONTAINER petstore ...), linked to the CLI copied below.
  && ln -s /app/bin/petstore.js /usr/local/bin/petstore \
  # uid/gid 1000 for the service: the Node image's user `node` has them, and gives them up.
  && for name in $(getent passwd 1000 | cut -d: -f1); do userdel --remove "$name"; done \
  && for name in $(getent group 1000 | cut -d: -f1); do groupdel "$name"; done \
  && groupadd --gid 1000 petstore && useradd --uid 1000 --gid 1000 --no-create-home --home-dir /data --shell /usr/sbin/nologin petstore \
  && mkdir -p /data && chown 1000:1000 /data

# One layer: the file system above, without the base's layers (npm and the rest would still be in them).
FROM scratch
COPY --from=runtime-root / /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATABASE_URL=/data/petstore.db \
    # SQLite's temporary files (large sorts) go beside the store, since the root filesystem may be read-only.
    SQLITE_TMPDIR=/data \
    # The start line then says its addresses are the container's, and to run the CLI in the container.
    PETSTORE_CONTAINER=true
WORKDIR /app
COPY --from=dependencies /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY data/demo.json ./data/demo.json
VOLUME /data
# Numeric, so that Kubernetes can check runAsNonRoot without a name lookup.
USER 1000:1000
EXPOSE 8080
# Needs nothing but Node: the slim image has no curl. Liveness only: an unreachable store or Redis is not a reason to
# replace the container (readiness, /readyz, is the balancer's concern).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["petstore", "health"]
# Node is PID 1 and gets SIGTERM itself: it drains for SHUTDOWN_DRAIN_MS, then stops (exit 0).
ENTRYPOINT ["petstore"]
CMD ["serve"]
