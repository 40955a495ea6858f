//! The ground floor for talking HTTP: the user agent, the one TLS setup (rustls with the ring
//! provider and the platform verifier, plus `ca_bundle`), the reqwest client, capped body reads,
//! and how a reqwest failure is classified and reported. It imports nothing of ours but settings,
//! errors, secrets and the retry policy's outcomes, so the token exchange (`auth`), the send loop
//! (`transport`) and subscriptions (`subscribe`) all build on it without importing each other.

use std::sync::Arc;

use bytes::Bytes;
use reqwest::header::HeaderMap;

use super::config::Settings;
use super::error::{Error, Result};
use super::retry::Failure;
use super::secret::Redactor;

pub(crate) const USER_AGENT: &str = concat!("secfindings-python/", env!("CARGO_PKG_VERSION"));

pub(crate) fn install_crypto_provider() {
    // reqwest is built without a default provider (ring keeps the build small); installing it
    // twice is harmless, so the error of a second install is ignored on purpose.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The reqwest client, on `tls` (the client's one TLS configuration, see [`tls_config`]) with
/// HTTP/2 and HTTP/1.1 offered by ALPN.
pub(crate) fn build_http(settings: &Settings, tls: &rustls::ClientConfig) -> Result<reqwest::Client> {
    install_crypto_provider();
    let mut http_tls = tls.clone();
    http_tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut b = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .connect_timeout(settings.connect_timeout)
        .timeout(settings.timeout)
        .pool_idle_timeout(std::time::Duration::from_secs(60))
        .tcp_nodelay(true)
        // No redirect is followed, for the API or the identity provider: a redirect would carry
        // the JWT, the API token, a document or a mutation to wherever the Location says.
        .redirect(reqwest::redirect::Policy::none())
        .gzip(true)
        .tls_backend_preconfigured(http_tls);
    if let Some(p) = &settings.proxy {
        let proxy = reqwest::Proxy::all(p.as_str())
            .map_err(|e| Error::config(format!("proxy is not usable: {e}")))?
            .no_proxy(reqwest::NoProxy::from_env());
        b = b.proxy(proxy);
    } else if settings.all_loopback() {
        // The emulator is on this machine: an HTTPS_PROXY meant for the internet must not catch it.
        b = b.no_proxy();
    }
    b.build().map_err(|e| Error::config(format!("cannot build the HTTP client: {e}")))
}

/// The certificates of `ca_bundle`: a file that cannot be read, is not PEM or holds no
/// certificate is a configuration error, found at construction.
fn ca_certificates(path: &std::path::Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject as _;
    let pem = std::fs::read(path)
        .map_err(|e| Error::config(format!("ca_bundle {} cannot be read: {e}", path.display())))?;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::config(format!("ca_bundle {} is not a PEM bundle: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::config(format!("ca_bundle {} holds no certificate", path.display())));
    }
    Ok(certs)
}

/// Reads a body, decompressed, up to `cap` bytes; the flag says whether more was left unread
/// (the rest is never read: the connection is dropped instead of reused).
pub(crate) async fn read_capped(resp: &mut reqwest::Response, cap: usize) -> reqwest::Result<(Bytes, bool)> {
    let hint = resp.content_length().and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
    let mut buf = bytes::BytesMut::with_capacity(hint.min(cap).min(16 * 1024 * 1024));
    while let Some(chunk) = resp.chunk().await? {
        let room = cap.saturating_sub(buf.len());
        if chunk.len() > room {
            buf.extend_from_slice(&chunk[..room]);
            return Ok((buf.freeze(), true));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok((buf.freeze(), false))
}

/// The text of a `Location` header, for the message of a redirect that is not followed:
/// scrubbed, then cut.
pub(crate) fn location(redactor: &Redactor, h: &HeaderMap) -> String {
    h.get(reqwest::header::LOCATION)
        .map(|v| redactor.scrub_cut(&String::from_utf8_lossy(v.as_bytes()), 512).0)
        .unwrap_or_else(|| "(no Location)".into())
}

/// Maps a reqwest failure to the retry outcome it means.
pub(crate) fn classify(e: &reqwest::Error) -> Failure {
    if e.is_timeout() {
        Failure::TimedOut
    } else if e.is_connect() {
        Failure::ConnectFailed
    } else {
        Failure::ConnectionLost
    }
}

/// A transport error with the whole cause chain, scrubbed of secrets.
pub(crate) fn transport_error(redactor: &Redactor, peer: &str, e: &reqwest::Error) -> Error {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    let text = redactor.scrub(&text);
    if e.is_timeout() {
        Error::Timeout(format!("request to the {peer} timed out: {text}"))
    } else {
        Error::Transport(format!("request to the {peer} failed: {text}"))
    }
}

fn tls_error(e: impl std::fmt::Display) -> Error {
    Error::config(format!("TLS cannot be set up: {e}"))
}

/// The client's one TLS configuration, for its HTTP requests (reqwest, which adds ALPN) and its
/// WebSocket connections alike: rustls with the ring provider and the platform's verifier, with
/// `ca_bundle`'s certificates added to the platform's roots. Built once per client.
pub(crate) fn tls_config(settings: &Settings) -> Result<Arc<rustls::ClientConfig>> {
    use rustls_platform_verifier::BuilderVerifierExt as _;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?;
    let config = match &settings.ca_bundle {
        None => builder.with_platform_verifier().map_err(tls_error)?.with_no_client_auth(),
        Some(path) => {
            let certs = ca_certificates(path)?;
            let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(certs, provider)
                .map_err(tls_error)?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier)).with_no_client_auth()
        }
    };
    Ok(Arc::new(config))
}

/// The largest answer to a CONNECT read from a proxy (its status line and headers).
const MAX_CONNECT_ANSWER: usize = 16 * 1024;

/// A TCP connection to `host:port` through the HTTP proxy `proxy` (an HTTP `CONNECT` tunnel, as
/// reqwest makes for HTTPS): what WebSocket subscriptions use when the client has `proxy=`.
/// The proxy's credentials, if the URL has them, go in `Proxy-Authorization`; no error quotes them.
pub(crate) async fn tunnel(
    proxy: &url::Url,
    host: &str,
    port: u16,
) -> std::io::Result<tokio::net::TcpStream> {
    use base64::Engine as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let bad = |why: String| std::io::Error::other(why);
    if proxy.scheme() != "http" {
        return Err(bad(format!(
            "subscriptions go through http:// proxies only (a CONNECT tunnel); this proxy is {}://",
            proxy.scheme()
        )));
    }
    let proxy_host = proxy.host_str().ok_or_else(|| bad("the proxy URL names no host".into()))?;
    let proxy_host = proxy_host.trim_start_matches('[').trim_end_matches(']');
    let proxy_port = proxy.port_or_known_default().unwrap_or(80);
    let mut tcp = tokio::net::TcpStream::connect((proxy_host, proxy_port)).await?;
    let _ = tcp.set_nodelay(true);
    let target = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: {USER_AGENT}\r\n");
    if !proxy.username().is_empty() {
        let user = percent_encoding::percent_decode_str(proxy.username()).decode_utf8_lossy();
        let pass = percent_encoding::percent_decode_str(proxy.password().unwrap_or("")).decode_utf8_lossy();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        head.push_str(&format!("Proxy-Authorization: Basic {basic}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes()).await?;
    // The answer ends at the blank line; read it a byte at a time so nothing of the tunnel's own
    // traffic is taken with it.
    let mut answer = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_CONNECT_ANSWER {
            return Err(bad("the proxy's answer to CONNECT has no end".into()));
        }
        if tcp.read(&mut byte).await? == 0 {
            return Err(bad("the proxy closed the connection instead of answering CONNECT".into()));
        }
        answer.push(byte[0]);
    }
    let status_line = answer.split(|b| *b == b'\n').next().unwrap_or_default();
    let status = String::from_utf8_lossy(status_line);
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if !code.starts_with('2') || code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        // Only the status code: a proxy's text could echo the credentials it was sent.
        let shown: String = code.chars().filter(char::is_ascii_digit).take(3).collect();
        return Err(bad(format!("the proxy refused the tunnel to {target} (HTTP {shown})")));
    }
    Ok(tcp)
}
