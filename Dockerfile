# Rein's services: the worker, the gateway, the policy server, the API and the CLI (see docker-compose.yml).
FROM node:24.19-bookworm-slim AS build
WORKDIR /rein
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
# The example agent (deploy/rein.yaml's harness) needs the `openai` client, a dev dependency of
# Rein (dependency-free): it gets its own copy before the dev dependencies are pruned.
RUN npm run build \
  && mkdir -p examples/calculator-agent/node_modules \
  && cp -r node_modules/openai examples/calculator-agent/node_modules/ \
  && npm prune --omit=dev

FROM node:24.19-bookworm-slim
WORKDIR /rein
ENV NODE_ENV=production REIN_DATA_DIR=/data
COPY --from=build /rein/package.json ./
COPY --from=build /rein/node_modules ./node_modules
COPY --from=build /rein/dist ./dist
COPY --from=build /rein/bin ./bin
# The embedded base policy and the example agent the compose config trains.
COPY --from=build /rein/models ./models
COPY --from=build /rein/examples ./examples
ENTRYPOINT ["node", "bin/rein.js"]
