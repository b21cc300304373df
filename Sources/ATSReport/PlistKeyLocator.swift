import ATSPolicy
import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Where a key of an XML property list is written: the 1-based line and column of its `<key>` element
/// (for an array item, of the item's element), and the column just past the element's end tag.
public struct PlistKeyLocation: Sendable, Equatable {
    public var line: Int
    public var column: Int
    public var endLine: Int
    public var endColumn: Int

    public init(line: Int, column: Int, endLine: Int, endColumn: Int) {
        self.line = line
        self.column = column
        self.endLine = endLine
        self.endColumn = endColumn
    }
}

/// Finds the `<key>` element of each key path in an XML property list, so that a lint finding can point at
/// the line and column of its key. Foundation's `XMLParser` reads the document (and reports where each
/// element ends its start tag); the locator walks the dictionaries and arrays to name every key by its
/// `KeyPath`, array items as `[index]` (the linter's spelling).
///
/// Binary and OpenStep plists have no lines: `init?` returns nil for anything that is not XML or does not
/// parse. Columns count Unicode scalars.
public struct PlistKeyLocator: Sendable {
    /// Every key path found, with where its key is written (the first occurrence wins).
    public let locations: [KeyPath: PlistKeyLocation]

    /// Reads `data` as an XML plist. `rootPath` names the root dictionary: `[]` for an Info.plist,
    /// `KeyPath.ats` for a bare NSAppTransportSecurity dictionary.
    public init?(xml data: Data, rootPath: KeyPath = []) {
        guard Self.looksLikeXML(data) else { return nil }
        let walker = PlistXMLWalker(lines: Self.lines(of: data), rootPath: rootPath)
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = walker
        guard parser.parse() else { return nil }
        locations = walker.locations
    }

    /// The location of `path`, or of its longest prefix that was found (nil when not even the root was).
    public func location(of path: KeyPath) -> PlistKeyLocation? {
        var components = path.components
        while true {
            if let found = locations[KeyPath(components)] { return found }
            guard !components.isEmpty else { return nil }
            components.removeLast()
        }
    }

    /// Whether the bytes start (after an optional BOM and white space) like an XML document.
    static func looksLikeXML(_ data: Data) -> Bool {
        var bytes = data.prefix(64)[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        let text = bytes.drop { [0x20, 0x09, 0x0A, 0x0D].contains($0) }
        return text.first == UInt8(ascii: "<")
    }

    /// The document's lines as UTF-8 bytes (1-based access through `lines[line - 1]`).
    static func lines(of data: Data) -> [[UInt8]] {
        Array(data).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map(Array.init)
    }
}

/// The `XMLParser` delegate behind `PlistKeyLocator`: a stack of the open containers and the text of the key
/// being read. Used on one thread, for one parse.
private final class PlistXMLWalker: NSObject, XMLParserDelegate {
    /// An open `<dict>` or `<array>` and the path it stands for.
    private enum Container {
        /// `pendingKey` is the key whose value comes next.
        case dictionary(path: KeyPath, pendingKey: String?)
        /// `next` is the index the next item gets.
        case array(path: KeyPath, next: Int)
    }

    private let lines: [[UInt8]]
    private let rootPath: KeyPath
    private var stack: [Container] = []
    private var keyText: String?
    private var keyStart: (line: Int, column: Int)?
    /// Elements opened for values, each with the path it was given (for its end position), innermost last.
    private var valuePaths: [KeyPath?] = []
    private(set) var locations: [KeyPath: PlistKeyLocation] = [:]

    init(lines: [[UInt8]], rootPath: KeyPath) {
        self.lines = lines
        self.rootPath = rootPath
    }

    func parser(
        _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        let start = startOfTag(element, parser)
        if element == "key" {
            keyText = ""
            keyStart = start
            return
        }
        guard element != "plist" else { return }
        // A value: name it by its place in the enclosing container.
        var path: KeyPath?
        switch stack.last {
        case .dictionary(let parent, let pendingKey)?:
            path = pendingKey.map { parent.appending($0) }
            stack[stack.count - 1] = .dictionary(path: parent, pendingKey: nil)
        case .array(let parent, let next)?:
            path = parent.appending("[\(next)]")
            stack[stack.count - 1] = .array(path: parent, next: next + 1)
            if let path, locations[path] == nil {
                locations[path] = PlistKeyLocation(line: start.line, column: start.column, endLine: 0, endColumn: 0)
            }
        case nil:
            path = rootPath
            if locations[rootPath] == nil {
                locations[rootPath] = PlistKeyLocation(
                    line: start.line, column: start.column, endLine: 0, endColumn: 0)
            }
        }
        valuePaths.append(path)
        switch element {
        case "dict": stack.append(.dictionary(path: path ?? rootPath, pendingKey: nil))
        case "array": stack.append(.array(path: path ?? rootPath, next: 0))
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        keyText?.append(string)
    }

    func parser(
        _ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?
    ) {
        let end = endOfTag(element, parser)
        if element == "key" {
            guard let key = keyText, let start = keyStart else { return }
            keyText = nil
            if case .dictionary(let parent, _)? = stack.last {
                stack[stack.count - 1] = .dictionary(path: parent, pendingKey: key)
                let path = parent.appending(key)
                if locations[path] == nil {
                    locations[path] = PlistKeyLocation(
                        line: start.line, column: start.column, endLine: end.line, endColumn: end.column)
                }
            }
            return
        }
        guard element != "plist" else { return }
        if element == "dict" || element == "array" { stack.removeLast() }
        // Array items and the root end where their element ends.
        if let path = valuePaths.popLast() ?? nil, let found = locations[path], found.endLine == 0 {
            locations[path]?.endLine = end.line
            locations[path]?.endColumn = end.column
        }
    }

    /// The line and column of the `<` that opened `element`. The parser reports a position at the end of the
    /// start tag; the `<name` before it on that line is the start (that position itself when the tag spans lines).
    private func startOfTag(_ element: String, _ parser: XMLParser) -> (line: Int, column: Int) {
        let line = parser.lineNumber
        let byteIndex = lastIndex(of: "<\(element)", onLine: line, atOrBefore: parser.columnNumber)
        return (line, scalarColumn(line, byteColumn: byteIndex.map { $0 + 1 } ?? parser.columnNumber))
    }

    /// The line and the column just past the `>` that closed `element` (for an empty element such as `<true/>`,
    /// past its `/>`): SARIF's exclusive end column.
    private func endOfTag(_ element: String, _ parser: XMLParser) -> (line: Int, column: Int) {
        let line = parser.lineNumber
        let closing = "</\(element)>"
        if let index = lastIndex(of: closing, onLine: line, atOrBefore: parser.columnNumber) {
            return (line, scalarColumn(line, byteColumn: index + closing.utf8.count + 1))
        }
        if let index = lastIndex(of: "/>", onLine: line, atOrBefore: parser.columnNumber) {
            return (line, scalarColumn(line, byteColumn: index + 3))
        }
        return (line, scalarColumn(line, byteColumn: parser.columnNumber))
    }

    /// The 0-based byte index of the last `token` on `line` that starts before the 1-based byte column
    /// `column` (the parser's positions are at or just past a tag's `>`), nil when there is none.
    private func lastIndex(of token: String, onLine line: Int, atOrBefore column: Int) -> Int? {
        guard line >= 1, line <= lines.count else { return nil }
        let bytes = lines[line - 1]
        let needle = Array(token.utf8)
        var index = min(column, bytes.count) - 1
        index = min(index, bytes.count - needle.count)
        while index >= 0 {
            if bytes[index..<index + needle.count].elementsEqual(needle) { return index }
            index -= 1
        }
        return nil
    }

    /// The 1-based column in Unicode scalars of the 1-based byte column `byteColumn` on `line`.
    private func scalarColumn(_ line: Int, byteColumn: Int) -> Int {
        guard line >= 1, line <= lines.count, byteColumn > 1 else { return max(1, byteColumn) }
        let prefix = lines[line - 1].prefix(byteColumn - 1)
        return String(decoding: prefix, as: UTF8.self).unicodeScalars.count + 1
    }
}
