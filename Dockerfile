# The Petstore Inventory Service image (docs/deployment.md).
#
#   docker build -t petstore-inventory:1.0.0 .
#   docker run -p 8080:8080 -v petstore:/data petstore-inventory:1.0.0            # SQLite in the /data volume
#   docker exec CONTAINER petstore keys create --plan free --name me              # a key, printed once
#
# NODE_IMAGE builds: any Node.js 22+ image with npm on Debian bookworm; the default is the official one. The runtime is
# RUNTIME_IMAGE, the Debian that image is made from, with only the node binary copied from NODE_IMAGE: npm and Node's C
# headers (about 90 MB, and the packages scanners most often flag) stay out of what runs. Both must be the same Debian
# release, since the node binary links against its C libraries.
ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=debian:bookworm-slim

# Build: compile the TypeScript with the dev dependencies.
FROM ${NODE_IMAGE} AS build
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

FROM ${RUNTIME_IMAGE}
COPY --from=build /usr/local/bin/node /usr/local/bin/node
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATABASE_URL=/data/petstore.db \
    # SQLite's temporary files (large sorts) go beside the store, since the root filesystem may be read-only.
    SQLITE_TMPDIR=/data
WORKDIR /app
COPY --from=dependencies /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY data/demo.json ./data/demo.json
# `petstore` on PATH (docker exec CONTAINER petstore ...), the user that runs it, and the store's directory, theirs.
RUN node --version \
  && ln -s /app/bin/petstore.js /usr/local/bin/petstore \
  && groupadd --gid 1000 petstore && useradd --uid 1000 --gid 1000 --no-create-home --home-dir /data --shell /usr/sbin/nologin petstore \
  && mkdir -p /data && chown 1000:1000 /data
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
