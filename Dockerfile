# Builds every executable of the root package in release mode, then runs them on a slim image.
# Hummingbird 2.28 and jwt-kit 5.8 need Swift tools 6.2 or later, so the build image is Swift 6.3
# (the toolchain the repository is developed and tested with).
FROM swift:6.3 AS build
RUN apt-get update -qq \
    && apt-get install -qq -y --no-install-recommends libsqlite3-dev libpq-dev zlib1g-dev libssl-dev \
        libcurl4-openssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN swift build -c release \
    && mkdir -p /out \
    && find "$(swift build -c release --show-bin-path)" -maxdepth 1 -type f -perm -u+x -exec cp {} /out/ \;

FROM swift:6.3-slim
RUN apt-get update -qq \
    && apt-get install -qq -y --no-install-recommends libsqlite3-0 zlib1g curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
EXPOSE 8080
CMD ["sync-server", "serve", "--host", "0.0.0.0", "--port", "8080"]
