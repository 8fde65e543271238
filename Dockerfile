# syntax=docker/dockerfile:1
# neardup: multi-stage build. The builder compiles with BuildKit-style cache
# mounts (cargo registry and target dir, kept by the builder between builds),
# so editing src/ recompiles only this crate. There are no stub sources: the
# whole build context (see .dockerignore) is copied, so every bench, example
# and test target that Cargo.toml declares is there when cargo reads it.

# Tag of the builder image, rust:<RUST_VERSION>-slim-bookworm: the toolchain
# that compiles neardup. The crate needs Cargo.toml's rust-version or newer.
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-slim-bookworm AS builder
WORKDIR /build
COPY . .
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The target dir is a cache mount, not part of the image: the binary is copied
# out of it in the same RUN. Cargo decides freshness by mtime, and COPY keeps
# the context's mtimes, which may be older than the cache's last build of other
# contents (another checkout, cp -p): so sources whose checksum differs from
# that last build's (target/src.sums) are touched first.
RUN --mount=type=cache,id=neardup-cargo-registry,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,id=neardup-target,target=/build/target,sharing=locked \
    find src -type f -exec sha256sum {} + | sort > /tmp/src.sums \
    && touch target/src.sums \
    && comm -23 /tmp/src.sums target/src.sums | cut -c67- | xargs -r -d '\n' touch \
    && cargo build --release --locked --bin neardup \
    && cp /tmp/src.sums target/src.sums \
    && cp target/release/neardup /usr/local/bin/neardup \
    && strip /usr/local/bin/neardup

FROM debian:bookworm-slim AS runtime
RUN groupadd --system --gid 10001 neardup \
    && useradd --system --uid 10001 --gid neardup --home-dir /data --shell /usr/sbin/nologin neardup \
    && mkdir -p /data \
    && chown neardup:neardup /data
COPY --from=builder /usr/local/bin/neardup /usr/local/bin/neardup
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
