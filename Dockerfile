# syncd on an empty base image: the static binary from dist/, nothing else
# (no shell, no libc, no CA bundle). Nothing is downloaded to build it.
#
#   make docker                      # builds dist/syncd-linux-$(go env GOARCH), then this image
#   make release && docker build --build-arg TARGETARCH=arm64 -t syncd .
#
# The default command serves the embedded todos demo with development
# authentication on 0.0.0.0:8787 (a demo only: any client picks its
# identity), its SQLite database under the volume /data. Production runs
# pass their own command, e.g.
#   docker run ... syncd serve --auth jwt --jwt-algorithm EdDSA --jwt-key-file /run/secrets/jwt.pub --schema /etc/syncd/app.ir.json
# Set the admin address with SYNCD_ADMIN_LISTEN (not the flag) so that the
# health check, which reads it, follows. TLS to PostgreSQL with certificate
# verification needs a CA bundle mounted and named in the URL (sslrootcert).
FROM scratch

# Set by BuildKit; the legacy builder needs --build-arg (make docker passes it).
ARG TARGETARCH

# /data (the database) and /tmp (large responses spill there) belong to
# the runtime user; a named volume on /data starts with that ownership.
COPY --chown=65532:65532 deploy/rootfs/ /
COPY dist/syncd-linux-${TARGETARCH} /syncd

ENV SYNCD_LISTEN=0.0.0.0:8787 \
    SYNCD_ADMIN_LISTEN=127.0.0.1:8788 \
    SYNCD_DATABASE=/data/syncd.db \
    TMPDIR=/tmp

USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
# 8787: the sync API. 8788: the admin listener (/readyz, /metrics); it is
# on loopback unless SYNCD_ADMIN_LISTEN and SYNCD_ADMIN_TOKEN_FILE say otherwise.
EXPOSE 8787 8788

# syncd drains on SIGTERM: /readyz turns 503 for --shutdown-delay (5s), then
# in-flight requests get --shutdown-timeout (15s); stop with a grace above
# 20s (docker stop -t 30, compose stop_grace_period: 30s).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/syncd", "health", "--timeout", "3s"]

ENTRYPOINT ["/syncd"]
CMD ["serve", "--allow-insecure-dev-auth"]
