#!/usr/bin/env bash
# Resolve (or reuse) ZooKeeper servers of every supported line from Maven Central, for the tests.
# Test tooling only: nothing here is part of what zkop ships.
#
#   hack/zookeeper-lines.sh [VERSION|LINE ...]   # e.g. 3.5.10, or 3.5; default: every line in
#                                                # tests/support/zookeeper-lines/versions
#
# Prints one directory per version asked for, in order, as the last lines of its output; each holds
# lib/*.jar (the server's run-time class path: zookeeper, zookeeper-jute, netty, slf4j-reload4j binding,
# metrics-core from 3.6) and a file `version`. The directories form a version-keyed cache outside the repository,
#   ${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/zookeeper/<version>-<hash>/
# where <hash> covers tests/support/zookeeper-lines/pom.xml and this script, so a changed recipe resolves anew
# and an unchanged one is reused without running Maven. Maven's own repository (~/.m2) keeps the downloads.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
project="$here/tests/support/zookeeper-lines"
plugin=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
cache=${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/zookeeper
hash=$(cat "$project/pom.xml" "$0" | sha256sum | cut -c1-12)

known=$(grep -v '^#' "$project/versions" | awk 'NF == 2')
if [ $# -eq 0 ]; then
  set -- $(echo "$known" | awk '{print $2}')
fi

dirs=()
for want in "$@"; do
  case "$want" in
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  esac
  version=$(echo "$known" | awk -v w="$want" '$1 == w {print $2}')
  version=${version:-$want}
  if ! [[ "$version" =~ ^3\.([5-9])\.[0-9]+$ ]]; then
    echo "zookeeper-lines.sh: not a ZooKeeper 3.5-3.9 release or line: $want" >&2
    exit 2
  fi
  profile="zk3${BASH_REMATCH[1]}"
  dir="$cache/$version-$hash"
  if [ ! -f "$dir/version" ]; then
    command -v mvn >/dev/null || { echo "zookeeper-lines.sh: mvn is not on PATH (apt-get install -y maven)" >&2; exit 1; }
    work="$dir.partial"
    rm -rf "$work"
    mkdir -p "$work/lib"
    cp "$project/pom.xml" "$work/pom.xml"
    started=$(date +%s)
    echo "resolving ZooKeeper $version ($profile) from Maven Central" >&2
    if ! (cd "$work" && mvn -B -q -P "$profile" -Dzk.version="$version" "$plugin:copy-dependencies" \
          -DincludeScope=runtime -DoutputDirectory="$work/lib" >"$work/mvn.log" 2>&1); then
      tail -40 "$work/mvn.log" >&2
      echo "zookeeper-lines.sh: resolving ZooKeeper $version failed (log: $work/mvn.log)" >&2
      exit 1
    fi
    if [ ! -f "$work/lib/zookeeper-$version.jar" ]; then
      echo "zookeeper-lines.sh: no zookeeper-$version.jar after resolving (log: $work/mvn.log)" >&2
      exit 1
    fi
    rm -f "$work/mvn.log"
    echo "$version" > "$work/version"
    rm -rf "$dir"
    mv "$work" "$dir"
    echo "ZooKeeper $version resolved in $(( $(date +%s) - started )) s" >&2
  fi
  dirs+=("$dir")
done
printf '%s\n' "${dirs[@]}"
