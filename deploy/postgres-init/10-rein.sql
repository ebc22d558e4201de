-- Rein's own database beside Temporal's, on the compose PostgreSQL (run once, by the postgres
-- image's entrypoint, when its data volume is new). Rein creates its tables itself at start.
-- Change the password here and in REIN_STORE_URL (docker-compose.yml) together.
CREATE ROLE rein LOGIN PASSWORD 'rein';
CREATE DATABASE rein OWNER rein;
