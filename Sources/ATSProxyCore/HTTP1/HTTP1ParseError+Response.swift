extension HTTP1ParseError {
    /// The standard reason phrase of `status`, for the status line of the proxy's refusal (the body names the
    /// broken rule).
    public var statusReasonPhrase: String {
        switch status {
        case 431: "Request Header Fields Too Large"
        case 501: "Not Implemented"
        case 505: "HTTP Version Not Supported"
        default: "Bad Request"
        }
    }
}
