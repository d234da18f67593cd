//! A TLS handshake that failed on the server's certificate, said in words
//! with the fix (never rustls's debug text): a certificate authority used
//! as the server's own certificate (what `openssl req -x509` makes), an
//! issuer not trusted, a host name the certificate does not name, a
//! certificate out of its validity, a client certificate the server wants.
//! The rustls name of the problem stays in parentheses, to search for.

use crate::error::Error;

/// How to make a certificate rustls accepts, for the messages.
const REMAKE: &str = "make a CA and sign the server's certificate with it, then give the CA as ca_file \
                      (or, for a self-signed certificate, make it with -addext \
                      basicConstraints=critical,CA:FALSE and give the certificate itself as ca_file)";

/// The refusal `e` names, as an `Error::Configuration` about `who` (the
/// server, a Sentinel, a master), or `None` when `e` is no certificate problem.
/// `ca_given`: a `ca_file` was given.
pub(crate) fn certificate_error(e: &redis::RedisError, who: &str, ca_given: bool) -> Option<Error> {
    let text = e.to_string();
    let trusted = if ca_given { "the authorities in ca_file" } else { "this machine's trusted authorities" };
    let problem = |code: &str| text.contains(code);
    let message = if problem("CaUsedAsEndEntity") {
        format!(
            "{who} presents a certificate marked as a certificate authority (basicConstraints CA:TRUE, \
             what `openssl req -x509` makes unless told otherwise), which ferrolock's TLS (rustls) refuses as \
             a server's own certificate (CaUsedAsEndEntity): {REMAKE}; ?ssl_cert_reqs=none in the URL skips \
             every certificate check (unsafe)"
        )
    } else if problem("UnknownIssuer") {
        let fix = if ca_given {
            "give as ca_file the PEM of the authority that signed it"
        } else {
            "give ca_file=PATH, the PEM of the authority that signed it (your own CA, for a certificate you made)"
        };
        format!(
            "the certificate {who} presents is not signed by {trusted} (UnknownIssuer): {fix}; for a \
             self-signed certificate, {REMAKE}"
        )
    } else if problem("NotValidForName") || problem("not valid for name") {
        let name =
            text.split("for name ").nth(1).and_then(|rest| rest.split([';', ' ']).next()).unwrap_or("");
        format!(
            "the certificate {who} presents is not valid for name {name} of the URL's host \
             (NotValidForName): connect by a host name or IP address its subjectAltName lists, or remake it \
             with that name"
        )
    } else if problem("Expired") || problem("NotValidYet") {
        format!(
            "the certificate {who} presents is outside its validity period (expired, or not valid yet; check \
             the clocks): renew it (Expired / NotValidYet)"
        )
    } else if problem("CertificateRequired") || (problem("HandshakeFailure") && problem("alert")) {
        format!(
            "{who} wants a client certificate (tls-auth-clients) and ferrolock sent none, or one it does not \
             accept: give ssl_certfile=PATH&ssl_keyfile=PATH in the URL's query, or set tls-auth-clients no \
             on the server"
        )
    } else if problem("invalid peer certificate") {
        let detail = text.rsplit("invalid peer certificate: ").next().unwrap_or("");
        let code = detail.split(|c: char| !c.is_alphanumeric()).rfind(|w| !w.is_empty()).unwrap_or("");
        if ca_given {
            format!("the certificate {who} presents was refused ({code}): check it against {trusted}")
        } else {
            // No ca_file: checked against this machine's authorities, which
            // did not sign it (a self-signed certificate, or one of your own
            // CA, reads so: BadSignature when its issuer's name is found
            // among them but not its key).
            format!(
                "the certificate {who} presents was refused ({code}) by {trusted}: give ca_file=PATH, the PEM \
                 of the authority that signed it (your own CA, for a certificate you made); for a self-signed \
                 certificate, {REMAKE}"
            )
        }
    } else {
        return None;
    };
    Some(Error::Configuration(message))
}
