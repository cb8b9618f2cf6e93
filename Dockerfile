# Builds every executable of the root package in release mode, then runs them on a slim image.
# The repository needs Swift 6.2 or later (hummingbird 2.28, jwt-kit 5.8 and async-http-client 1.37 declare
# Swift tools 6.2); the image defaults to 6.3, the toolchain it is developed and tested with
# (`docker build --build-arg SWIFT_VERSION=6.2 .` for the minimum).
ARG SWIFT_VERSION=6.3
FROM swift:${SWIFT_VERSION} AS build
RUN apt-get update -qq \
    && apt-get install -qq -y --no-install-recommends libsqlite3-dev libpq-dev zlib1g-dev libssl-dev \
        libcurl4-openssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN swift build -c release \
    && mkdir -p /out \
    && find "$(swift build -c release --show-bin-path)" -maxdepth 1 -type f -perm -u+x -exec cp {} /out/ \;

FROM swift:${SWIFT_VERSION}-slim
RUN apt-get update -qq \
    && apt-get install -qq -y --no-install-recommends libsqlite3-0 zlib1g curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
EXPOSE 8080
CMD ["sync-server", "serve", "--host", "0.0.0.0", "--port", "8080"]
