# Sourced by the scripts that install skiplock as a user does. pack_into DIR
# puts this package's tarball in DIR: a copy of SKIPLOCK_TARBALL when it names
# one (CI packs once for all of them: each `npm pack` builds the package), else
# a fresh `npm pack` of this checkout.
pack_into() {
  if [ -n "${SKIPLOCK_TARBALL:-}" ]; then
    cp "$SKIPLOCK_TARBALL" "$1/"
  else
    npm pack --silent --pack-destination "$1" >/dev/null
  fi
}
