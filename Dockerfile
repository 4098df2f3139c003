# Builds the load-agent binary (bundled librdkafka via cmake) and ships it on a slim runtime.
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      cmake pkg-config libcurl4-openssl-dev libssl-dev zlib1g-dev libzstd-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p load-agent --features kafka

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      ca-certificates libcurl4 libssl3 zlib1g libzstd1 libsasl2-2 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /nonexistent --shell /usr/sbin/nologin load-agent
COPY --from=build /src/target/release/load-agent /usr/local/bin/load-agent
COPY --from=build /src/sops /opt/load-agent/sops
COPY --from=build /src/schemas /opt/load-agent/schemas
WORKDIR /opt/load-agent
USER 10001
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/load-agent"]
CMD ["serve"]
