"""A certificate authority of the test run, for HTTPS test sites under real host names.

Services under test trust it through SCREENSHOT_CA_CERTIFICATES (render/browser/trust.py), the way an operator
would make Chromium trust an internal CA. Nothing here is trusted by anything else on the machine.
"""

from __future__ import annotations

import atexit
import datetime
import ipaddress
import shutil
import ssl
import tempfile
from functools import cache
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class Authority:
    """A CA certificate in `ca_file` and a server certificate it signed for `hosts`, 127.0.0.1 and
    `addresses`; the certificate and its key in `chain_file`."""

    def __init__(self, directory: Path, hosts: list[str], addresses: tuple[str, ...] = ()) -> None:
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "screenshot-service test CA")])
        ca = (self._builder(ca_name, ca_name, ca_key, now)
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                           content_commitment=False, key_encipherment=False,
                                           data_encipherment=False, key_agreement=False, encipher_only=False,
                                           decipher_only=False), critical=True)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        server = (self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]), ca_name, key, now)
                  .add_extension(x509.SubjectAlternativeName([
                      *(x509.DNSName(host) for host in hosts),
                      *(x509.IPAddress(ipaddress.ip_address(address)) for address in ("127.0.0.1", *addresses))]),
                      critical=False)
                  .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                  .sign(ca_key, hashes.SHA256()))
        self.ca_file = directory / "ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.chain_file = directory / "server.pem"
        self.chain_file.write_bytes(server.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))

    @staticmethod
    def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey,
                 now: datetime.datetime) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=7)))

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.chain_file)
        return context


@cache
def authority() -> Authority:
    """The run's authority, made on first use, for the test host names (tests/support/pages/annoyances.py)."""
    from tests.support.pages.annoyances import TLS_HOSTS

    directory = Path(tempfile.mkdtemp(prefix="screenshot-test-ca-"))
    atexit.register(shutil.rmtree, directory, True)
    return Authority(directory, ["publisher.test", *TLS_HOSTS])
