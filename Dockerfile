# Rein's services (workers now; the gateway and policy server as they land).
FROM node:20.20-bookworm-slim AS build
WORKDIR /rein
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:20.20-bookworm-slim
WORKDIR /rein
ENV NODE_ENV=production REIN_DATA_DIR=/data
COPY --from=build /rein/package.json ./
COPY --from=build /rein/node_modules ./node_modules
COPY --from=build /rein/dist ./dist
COPY --from=build /rein/bin ./bin
ENTRYPOINT ["node", "bin/rein.js"]
