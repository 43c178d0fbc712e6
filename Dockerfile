# The UaC worker/sink image. Used by docker-compose.yml; CI cannot build it (no Docker engine).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY schemas ./schemas
COPY projections ./projections
COPY rules ./rules
COPY streams ./streams
COPY deploy ./deploy
COPY examples ./examples
# Editable, as `make setup` installs it: the processes read deploy/ (the ClickHouse DDL, the
# tenants file) from this checkout, which a plain `pip install .` would leave behind
# (streams/checkout.py).
RUN pip install --no-cache-dir -c constraints.txt -e .
ENV UAC_HOME=/var/lib/uac
VOLUME ["/var/lib/uac"]
ENTRYPOINT ["uac"]
CMD ["worker"]
