# syntax=docker/dockerfile:1
# audience: `docker build -t audience .`, then `docker run -p 8080:8080 -v audience-data:/data audience`
# (embedded PostgreSQL in /data), or compose.yaml for PostgreSQL, MinIO, Redis and separate roles.
# docs/operating.md says more.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY bin ./bin
COPY manifests ./manifests
COPY src ./src
# The full install brings the Node.js 24 that the lock file pins (the `node` package, a dev
# dependency): the image runs that binary, the one `npm start` and the tests run, not the base
# image's. Its prepare script bundles the program (src/bundle.js, with rolldown, a dev dependency:
# one file per entry instead of some 900 modules to load at each start), so the sources are in
# first; npm's download cache is kept between builds instead. The development dependencies go
# afterwards, and the bundle is checked to be current without them: the program runs it, and
# would run its sources otherwise.
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund \
 && cp node_modules/node/bin/node /node \
 && npm prune --omit=dev --no-audit --no-fund \
 && /node -e "import('./src/bundle.js').then((b) => b.currentBundle() || process.exit(1))"

# Debian, not distroless: the embedded PostgreSQL's initdb and pg_ctl run commands through /bin/sh.
FROM debian:bookworm-slim
# jemalloc, which bin/audience preloads: it gives back the memory freed after a busy spell, which
# glibc's malloc keeps (docs/operating.md "Memory of the program").
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libjemalloc2 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 audience \
 && useradd --system --uid 10001 --gid audience --home-dir /app --shell /usr/sbin/nologin audience \
 && mkdir /data /app /app/.emulator && chown audience:audience /data /app/.emulator
COPY --from=build /node /usr/local/bin/node
WORKDIR /app
COPY --from=build /app ./
# Node's compile cache (src/main.js), written by the program's user beside the bundle: a
# container's first start fills it, and its later starts compile nothing.
RUN mkdir -p node_modules/.cache/audience && chown audience:audience node_modules/.cache/audience
ENV NODE_ENV=production DATA_DIR=/data HOST=0.0.0.0 PORT=8080
# Never root: the program, its embedded PostgreSQL and its files run as this user. A new named
# volume on /data takes the folder's owner from the image.
USER audience
# `docker run -p 8080:8080 audience emulate` (docs/emulator.md): the emulator's migrated database
# is prepared here, so that a container copies it rather than making it at each start.
ENV AUDIENCE_EMULATOR_CACHE=/app/.emulator
RUN node src/main.js emulate --prepare
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The launcher `npm start` runs: malloc's settings (two arenas, or jemalloc), then `exec node src/main.js`.
ENTRYPOINT ["bin/audience"]
CMD ["serve"]
