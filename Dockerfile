# One image for every process of the mirror: `api` (the default), `worker`, `migrate`, `sandbox`, and
# the operator's commands (`doctor`, `status`, `link`, ...). It holds the release build (`npm run
# build`) and production dependencies only; every setting comes from the environment at run time
# (docs/configuration.md), nothing secret is in the image.
#   docker build -t construction-mirror --build-arg MIRROR_COMMIT=$(git rev-parse HEAD) .
#   docker run --rm -e DATABASE_URL=... construction-mirror migrate
# The base is pinned to an exact release of Node 20 on Debian bookworm (slim); pin its digest too
# where your registry policy asks for it (NODE_IMAGE=node:20.20.2-bookworm-slim@sha256:...).
ARG NODE_IMAGE=node:20.20.2-bookworm-slim

# The build: every dependency, the TypeScript compiled into dist/, the workflow bundle made once.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY . .
RUN npm run build

# Production dependencies only. npm keeps development tools that are also an optional peer of a
# dependency (typescript and the Prisma CLI, of @prisma/client) unless optional ones are left out too.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --no-audit --no-fund --loglevel=error && npm cache clean --force

FROM ${NODE_IMAGE}
# tini as PID 1: signals reach node (a clean stop on SIGTERM) and exited children are reaped.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
  API_HOST=0.0.0.0 \
  API_PORT=4000
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json package-lock.json ./
# The release's commit, for /healthz, /metrics and the workers' identities (there is no .git here).
ARG MIRROR_COMMIT=""
ENV MIRROR_COMMIT=${MIRROR_COMMIT}
# The unprivileged user of the node image; the code is root's and read-only to it.
USER node
EXPOSE 4000
# The API's /healthz by default; a worker's is its metrics port's /healthz (MIRROR_HEALTHCHECK_URL,
# with `worker --metrics-port`), as docker-compose.yml sets.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["node", "dist/bin/healthcheck.js"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "dist/bin/mirror.js"]
CMD ["api"]
