//! The page, its script and its style, compiled into the binary: plain HTML
//! and JavaScript, no build step. The script is served apart from the page so
//! that the content security policy can forbid inline scripts.

use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

/// `GET /`.
pub async fn page() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        include_str!("assets/console.html"),
    )
}

/// `GET /console.js`.
pub async fn script() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/console.js"),
    )
}

/// `GET /console.css`.
pub async fn style() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/console.css"),
    )
}
