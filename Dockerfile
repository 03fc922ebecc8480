# Kafkite broker image: `docker build -t kafkite .`
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir .
VOLUME /data
EXPOSE 9092
# Clients inside the compose network reach it as kafkite:9092.
CMD ["kafkite", "serve", "--host", "0.0.0.0", "--port", "9092", "--data-dir", "/data", \
     "--override", "advertised.listeners=PLAINTEXT://kafkite:9092"]
