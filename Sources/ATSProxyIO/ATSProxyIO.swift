/// Namespace marker for the I/O driver: listeners, sockets, resolver, timers on Dispatch.
public enum ATSProxyIOModule {}
