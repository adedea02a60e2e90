#!/usr/bin/env bash
# Writes a throw-away test CA and a server certificate it signed into DIR, for the HTTPS
# benchmark's nginx (nginx-tls.conf.template):
#
#   bench/http/tls-certs.sh DIR   → DIR/ca.pem (what the clients trust: `verify => DIR/ca.pem`),
#                                   DIR/server.pem, DIR/server.key (what nginx serves)
#
# A CA of its own rather than one self-signed leaf: clients are checked the way an app behind a
# private CA uses them (a CA bundle given as `verify`), and rustls refuses a CA certificate used
# as the server's. The server certificate names 127.0.0.1 (the URL the benchmarks use: nothing
# is resolved) and localhost. P-256 keys: made in milliseconds, so every run makes fresh ones.
set -euo pipefail

dir="${1:?usage: tls-certs.sh DIR}"
mkdir -p "$dir"
cd "$dir"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj '/CN=resilient bench test CA' -keyout ca.key -out ca.pem \
    -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign' \
    2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj '/CN=127.0.0.1' -keyout server.key -out server.csr 2>/dev/null
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out server.pem \
    -extfile <(printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature' \
        'extendedKeyUsage=serverAuth' 'subjectAltName=IP:127.0.0.1,DNS:localhost') \
    2>/dev/null
rm -f server.csr ca.srl
