/// A list of parser parts kept from feed to feed so that a connection's parser does not allocate one per read.
/// Taken while in use: a feed nested inside the processing of the last one finds it gone and uses a list of its
/// own; given back emptied, with its capacity.
struct HTTPPartList {
    private var storage: [HTTPPart] = []

    /// The kept list (empty), leaving none behind until `giveBack`.
    mutating func take() -> [HTTPPart] {
        var parts: [HTTPPart] = []
        swap(&parts, &storage)
        return parts
    }

    /// Keeps `parts`' storage for the next `take`, emptied.
    mutating func giveBack(_ parts: inout [HTTPPart]) {
        parts.removeAll(keepingCapacity: true)
        swap(&parts, &storage)
    }

    /// Lets the storage go (an idle connection gives its buffers back).
    mutating func release() { storage = [] }
}
