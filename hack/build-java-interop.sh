#!/usr/bin/env bash
# Build (or reuse) the Java interop programs of tests/interop: tests/interop/java (small programs that use the real
# Apache Curator and Apache Dubbo 3 libraries from Maven Central), tests/interop/java-spring (a Spring Boot
# application with Spring Cloud Zookeeper discovery) and tests/interop/java-dubbo27 (a Dubbo 2.7 consumer, apart
# because Dubbo 2.7 and 3 cannot share a class path). Test tooling only: nothing of it ships in zkop.
#
#   hack/build-java-interop.sh
#
# Prints, as its last line, the directory holding `classpath-<project>.txt` for each project (each
# project's classes, then every dependency jar, ':'-separated, ready for `java -cp`). Builds into a version-keyed cache outside the repository:
#   ${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/java-interop/<hash>/
# where <hash> covers every project (pom.xml and sources), this script and the JDK's version. Needs the JDK
# (17) and Maven (3.8) on PATH: Debian's openjdk-17-jdk-headless and maven. The jars live in Maven's own
# repository (~/.m2, or MAVEN_OPTS=-Dmaven.repo.local=...). A cache hit returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
projects=$(cd "$here/../tests/interop" && pwd)
names="java java-spring java-dubbo27"
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-java-interop.sh: unknown argument: $1" >&2; exit 2 ;;
esac
for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "build-java-interop.sh: $tool is not on PATH (apt-get install openjdk-17-jdk-headless maven)" >&2; exit 1; }
done

# -XX:-UsePerfData (here and for Maven's JVM): no /tmp/hsperfdata_<user> left behind by a build or a cache hit.
export MAVEN_OPTS="${MAVEN_OPTS:-} -XX:-UsePerfData"
jdk=$(java -XX:-UsePerfData -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.runtime.version/ {print $2}')
# shellcheck disable=SC2086 # $names: the project names, one word each
hash=$( (cd "$projects" && for name in $names; do find "$name/pom.xml" "$name/src" -type f; done | LC_ALL=C sort \
  | xargs sha256sum; cat "$here/build-java-interop.sh"; echo "$jdk") \
  | sha256sum | cut -c1-12)
cache=${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/java-interop
out="$cache/$hash"

# A cache hit needs every jar it names still in Maven's repository (which may have been pruned since).
complete() {
  local file entry
  for name in $names; do
    file="$out/classpath-$name.txt"
    [ -f "$file" ] || return 1
    while IFS= read -r -d: entry; do [ -e "$entry" ] || return 1; done < <(tr -d '\n' < "$file"; echo :)
  done
}
if complete; then
  echo "$out"
  exit 0
fi
rm -rf "$out"

work="$out.partial.$$"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
echo "building the Java interop programs (JDK $jdk)" >&2
# Three projects: java (Curator, Dubbo 3), java-spring (Spring Boot's parent manages its versions its own way) and
# java-dubbo27 (Dubbo 2.7, whose classes clash with Dubbo 3's).
for name in $names; do
  mvn -B -q -f "$projects/$name/pom.xml" -Dinterop.out="$work/$name" package \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:build-classpath -Dmdep.outputFile="$work/deps.txt" >&2
  printf '%s:%s\n' "$out/$name/classes" "$(cat "$work/deps.txt")" > "$work/classpath-$name.txt"
  rm -f "$work/deps.txt"
done
mkdir -p "$cache"
if ! mv -T "$work" "$out" 2>/dev/null; then
  [ -f "$out/classpath-java-dubbo27.txt" ] || { echo "build-java-interop.sh: could not move $work to $out" >&2; exit 1; }
fi
trap - EXIT
rm -rf "$work"
echo "built in $(( $(date +%s) - started )) s: $out" >&2
echo "$out"
