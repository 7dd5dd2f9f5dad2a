# The tkv-seam engine image: the official vLLM image plus exactly the patched vllm/ files
# of the series (and, optionally, the matching turbo-attn release). Nothing is rebuilt.
#
# Built by `make image` (tkv-seam image), which stages the build context:
#   tkv-seam/manifest.json        per file: path, pristine sha256, patched sha256
#   tkv-seam/overlay/vllm/...     the patched files
#   tkv-seam/overlay_install.py   locate vllm, verify pristine, replace, byte-compile
#   tkv-seam/plugin/              with the plugin: requirements.txt (name==version --hash=...)
#                                 and the wheel, verified against bases.toml by the tool
#   tkv-seam/plugin_install.py    the base image's uv (or pip): offline, hash-checked, --no-deps
# and sets the labels (provenance: source, tkv-seam commit, base image and digest, series
# digest, plugin). Legacy-builder compatible (no BuildKit-only syntax).

# Pin by digest once the full index digest is recorded in bases.toml (only a prefix,
# sha256:c1c9f6fd5c10, is known today); `make image` checks the revision label first.
ARG BASE_IMAGE=vllm/vllm-openai:v0.31.0
FROM ${BASE_IMAGE}

LABEL org.opencontainers.image.title="vllm-openai with the tkv seam" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY tkv-seam /opt/tkv-seam

# One step: verify every target is the pristine base file, replace, byte-compile
# (fails naming the first file that differs), then the plugin when one is staged.
# -u: the scripts' output and errors reach the build log in the order they happen.
RUN python3 -u /opt/tkv-seam/overlay_install.py /opt/tkv-seam \
    && if [ -f /opt/tkv-seam/plugin/requirements.txt ]; then \
         python3 -u /opt/tkv-seam/plugin_install.py /opt/tkv-seam/plugin; \
       fi
