#!/usr/bin/env bash
# Resolve a build's lane into one KEY=VALUE file, inside the Neuron image build (docker/Dockerfile, stage os).
#
#   lane.sh LANES_DIR LANE DEFAULT_LANE OUT
#
# Why: a Dockerfile cannot read a file into ARG defaults, yet `docker build --build-arg LANE=2.28` alone
# must build lane 2.28. So the ARG defaults are the default lane's pins (copied from docker/lanes/2.27.env
# by `python3 docker/versions.py --write`), the lane files travel into the build, and this script decides
# each pin:
#   - the ARG's value, when it differs from the default lane's: it was passed with --build-arg (an
#     override; printed, so the build log shows it);
#   - otherwise LANE's value (an ARG left at its default, or passed with the default's value).
# The one case this rule cannot tell apart: an explicit --build-arg equal to the default lane's value on
# another lane takes that lane's value (pass a lane file of your own instead).
# Every key of LANE's file must be an ARG of the stage that runs this (the ARGs reach it as variables).
# OUT is sourced by every RUN that installs something (`set -a; . OUT; set +a`) and kept in the image.
set -euo pipefail

lanes_dir=$1 lane=$2 default_lane=$3 out=$4

lane_file=$lanes_dir/$lane.env
if [[ ! -r "$lane_file" ]]; then
  known=$(find "$lanes_dir" -maxdepth 1 -name '*.env' -printf '%f\n' | sed 's/\.env$//' | sort | paste -sd' ')
  echo "LANE=$lane: there is no docker/lanes/$lane.env; the lanes are: $known" >&2
  exit 1
fi

# KEY=VALUE lines of a lane file into the associative array named $2 (comments and blank lines skipped).
read_lane() {
  local -n into=$2
  local line key value
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ -z "${line// /}" || "$line" == \#* ]] && continue
    key=${line%%=*} value=${line#*=}
    if [[ "$line" != *=* || ! "$key" =~ ^[A-Z0-9_]+$ || -z "$value" || "$value" == *" "* ]]; then
      echo "$1: expected KEY=VALUE without spaces, got '$line'" >&2
      exit 1
    fi
    # shellcheck disable=SC2034 # `into` is a nameref: this writes the caller's array
    into["$key"]=$value
  done <"$1"
}

declare -A pins=() defaults=()
read_lane "$lane_file" pins
read_lane "$lanes_dir/$default_lane.env" defaults

{
  printf '# The resolved pins of this image (docker/lane.sh): lane %s, from docker/lanes/%s.env\n' "$lane" "$lane"
  printf 'LANE=%s\n' "$lane"
} >"$out"
for key in $(printf '%s\n' "${!pins[@]}" | sort); do
  given=${!key:-}
  value=${pins[$key]}
  if [[ -n "$given" && "$given" != "${defaults[$key]:-}" && "$given" != "$value" ]]; then
    echo "lane $lane: $key=$given (--build-arg override; docker/lanes/$lane.env says $value)" >&2
    value=$given
  fi
  printf '%s=%s\n' "$key" "$value" >>"$out"
done
echo "lane $lane resolved into $out:" >&2
grep -v '^#' "$out" >&2
