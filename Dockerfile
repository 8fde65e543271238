# syntax=docker/dockerfile:1
# neardup: multi-stage build. The dependency layer is cached separately from
# the sources, so editing src/ does not rebuild every crate.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-slim-bookworm AS builder
WORKDIR /build
# 1) Dependencies only: a dummy crate with the real manifest and lockfile.
COPY Cargo.toml Cargo.lock ./
COPY .cargo ./.cargo
RUN mkdir -p src benches \
    && echo 'fn main() {}' > src/main.rs \
    && echo '' > src/lib.rs \
    && echo 'fn main() {}' > benches/engine.rs \
    && cargo build --release --locked \
    && rm -rf src benches
# 2) The real sources.
COPY src ./src
COPY benches ./benches
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked \
    && strip target/release/neardup

FROM debian:bookworm-slim AS runtime
RUN groupadd --system --gid 10001 neardup \
    && useradd --system --uid 10001 --gid neardup --home-dir /data --shell /usr/sbin/nologin neardup \
    && mkdir -p /data \
    && chown neardup:neardup /data
COPY --from=builder /build/target/release/neardup /usr/local/bin/neardup
# config/default.toml is read relative to the working directory.
COPY config/default.toml /etc/neardup/config/default.toml
WORKDIR /etc/neardup
ENV NEARDUP_SERVER__BIND=0.0.0.0:8080 \
    NEARDUP_STORAGE__DATA_DIR=/data \
    NEARDUP_LOG__FORMAT=json
# Numeric uid:gid (the neardup user above) so a runtime can verify non-root.
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["neardup", "healthcheck"]
ENTRYPOINT ["neardup"]
CMD ["serve"]
