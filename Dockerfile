# The tkv-seam engine image: the official vLLM image plus exactly the patched vllm/ files
# of the series (and, optionally, the matching turbo-attn release). Nothing is rebuilt.
#
# Built by `make image` (tkv-seam image), which stages the build context:
#   tkv-seam/manifest.json        per file: path, pristine sha256, patched sha256
#   tkv-seam/overlay/vllm/...     the patched files
#   tkv-seam/overlay_install.py   locate vllm, verify pristine, replace, byte-compile
# Legacy-builder compatible (no BuildKit-only syntax).

# Pin by digest once the full index digest is recorded in bases.toml (only a prefix,
# sha256:c1c9f6fd5c10, is known today); `make image` checks the revision label first.
ARG BASE_IMAGE=vllm/vllm-openai:v0.31.0
FROM ${BASE_IMAGE}

# The plugin release matching this seam: `make image` passes the base's pin from
# bases.toml (<base>.seam.plugin; PROTOCOL.md section 11). Empty: no plugin.
ARG TURBO_ATTN=
ARG BASE_IMAGE
ARG BASE_REVISION=db9527a46873
ARG SEAM_DIGEST=unknown
ARG SEAM_VERSION=unknown

LABEL org.opencontainers.image.title="vllm-openai with the tkv seam" \
      org.opencontainers.image.licenses="Apache-2.0" \
      io.tkv-seam.base.image="${BASE_IMAGE}" \
      io.tkv-seam.base.revision="${BASE_REVISION}" \
      io.tkv-seam.series.digest="${SEAM_DIGEST}" \
      io.tkv-seam.version="${SEAM_VERSION}" \
      io.tkv-seam.turbo-attn="${TURBO_ATTN}"

COPY tkv-seam /opt/tkv-seam

# One step: verify every target is the pristine base file, replace, byte-compile
# (fails naming the first file that differs), then the optional plugin.
RUN python3 /opt/tkv-seam/overlay_install.py /opt/tkv-seam \
    && if [ -n "${TURBO_ATTN}" ]; then \
         if command -v uv >/dev/null; then uv pip install --system "${TURBO_ATTN}"; \
         else python3 -m pip install --no-cache-dir "${TURBO_ATTN}"; fi; \
       fi
