# The app's image: Streamlit serving app.py on 0.0.0.0:$PORT as a non-root user, with the saved benchmark runs and
# the shipped corpora inside, so the public pages need nothing outside the image. docs/DEPLOY.md builds and runs it.

# Stage 1: the runtime dependencies, exactly as pinned, in a virtualenv.
FROM python:3.11.14-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /build
COPY requirements-runtime.lock ./
# --no-deps: the lock names every package, so nothing unpinned is resolved; pip check proves the set is complete.
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-deps --requirement requirements-runtime.lock \
    && /opt/venv/bin/pip check

# Stage 2: the app. No compilers, no pip cache, no tests, no .git (.dockerignore keeps them out of the context).
FROM python:3.11.14-slim-bookworm
ARG GIT_COMMIT=""
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PORT=8080 \
    VERBATIM_GIT_COMMIT=$GIT_COMMIT
RUN groupadd --system --gid 10001 verbatim \
    && useradd --system --uid 10001 --gid verbatim --create-home --home-dir /home/verbatim \
       --shell /usr/sbin/nologin verbatim
WORKDIR /app
COPY --from=builder /opt/venv /opt/venv
COPY app.py ./
COPY .streamlit/config.toml .streamlit/config.toml
COPY pipeline/ pipeline/
COPY ui/ ui/
COPY benchmarks/corpora/ benchmarks/corpora/
COPY benchmarks/suites/ benchmarks/suites/
COPY benchmark_runs/ benchmark_runs/
# The code and data stay owned by root, so the app cannot change them. Bytecode and the corpora's search indexes are
# built once here rather than in every process. Only runs/ (the run store and the live runs) is the app's to write.
RUN python -m compileall -q app.py pipeline ui \
    && python -m pipeline.web.index_corpora benchmarks/corpora \
    && mkdir runs \
    && chown verbatim:verbatim runs
USER 10001:10001
EXPOSE 8080
# Exec form, through a launcher that execs into Streamlit: Streamlit is PID 1 and gets Cloud Run's SIGTERM.
CMD ["python", "-m", "ui.serve"]
