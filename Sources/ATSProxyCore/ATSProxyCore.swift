/// Namespace marker for the sans-io proxy core: HTTP/1 parsing, per-connection state machines
/// and diagnostics values. No sockets, no clock, no Dispatch.
public enum ATSProxyCoreModule {}
