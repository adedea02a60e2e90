<?php

namespace Resilient\Laravel\Console\Check;

/**
 * What a PHP file says without running it, read from its tokens: the classes it names (through
 * its namespace and `use` imports, group imports and aliases included), the arguments of its
 * calls (positional or named, over any number of lines, comments skipped), and the value of an
 * argument when it is a constant expression: a literal, or a class constant (`self::UPSTREAM`),
 * read through reflection from the loaded class.
 */
final class PhpSource
{
    /** @var list<array{0: int|string, 1: string}> the tokens that mean something (no whitespace, no comments) */
    private array $tokens = [];

    private string $namespace = '';

    /** @var array<string, string> lower-cased alias => fully qualified name */
    private array $imports = [];

    public function __construct(string $source, private ?\ReflectionClass $class = null)
    {
        foreach (token_get_all($source) as $t) {
            $t = is_array($t) ? [$t[0], $t[1]] : [$t, $t];
            if (! in_array($t[0], [T_WHITESPACE, T_COMMENT, T_DOC_COMMENT, T_OPEN_TAG], true)) {
                $this->tokens[] = $t;
            }
        }
        $this->readHeader();
    }

    /** The fully qualified class a name in this file stands for (`self` and `static`: the class read). */
    public function resolve(string $name): string
    {
        if (str_starts_with($name, '\\')) {
            return ltrim($name, '\\');
        }
        if (in_array(strtolower($name), ['self', 'static'], true) && $this->class !== null) {
            return $this->class->getName();
        }
        [$first, $rest] = array_pad(explode('\\', $name, 2), 2, null);
        if (isset($this->imports[strtolower($first)])) {
            return $this->imports[strtolower($first)] . ($rest === null ? '' : '\\' . $rest);
        }

        return ltrim($this->namespace . '\\' . $name, '\\');
    }

    /**
     * Every `new X(...)` whose class resolves to $class, by its arguments.
     *
     * @return list<list<array{name: ?string, tokens: list<array>, text: string}>>
     */
    public function news(string $class): array
    {
        $found = [];
        foreach ($this->tokens as $i => [$id]) {
            $next = $this->tokens[$i + 1] ?? null;
            if ($id === T_NEW && $next !== null && in_array($next[0], [T_STRING, T_NAME_QUALIFIED, T_NAME_FULLY_QUALIFIED], true)
                && strcasecmp($this->resolve($next[1]), $class) === 0) {
                // `new WithinDeadline` without parentheses is a call without arguments.
                $found[] = ($this->tokens[$i + 2][0] ?? null) === '(' ? $this->arguments($i + 2) : [];
            }
        }

        return $found;
    }

    /**
     * Every `->method(...)` and `X::method(...)` call, with how it was written (`Resilient::client()`, `->client()`)
     * and, for `->`, the token before it (`$this`, `$job`, `)` after a call).
     *
     * @return list<array{call: string, object: ?string, arguments: list<array{name: ?string, tokens: list<array>, text: string}>}>
     */
    public function calls(string $method): array
    {
        $found = [];
        foreach ($this->tokens as $i => [$id]) {
            if (! in_array($id, [T_OBJECT_OPERATOR, T_NULLSAFE_OBJECT_OPERATOR, T_DOUBLE_COLON], true)
                || ($this->tokens[$i + 1][0] ?? null) !== T_STRING || strcasecmp($this->tokens[$i + 1][1], $method) !== 0
                || ($this->tokens[$i + 2][0] ?? null) !== '(') {
                continue;
            }
            $receiver = $id === T_DOUBLE_COLON ? ($this->tokens[$i - 1][1] ?? '') : '';
            $found[] = [
                'call' => $receiver . $this->tokens[$i][1] . $method . '()',
                'object' => $id === T_DOUBLE_COLON ? null : (string) ($this->tokens[$i - 1][1] ?? ''),
                'arguments' => $this->arguments($i + 2),
            ];
        }

        return $found;
    }

    /**
     * The argument at $position, or named $name (null when not given).
     *
     * @param list<array{name: ?string, tokens: list<array>, text: string}> $arguments
     * @return array{name: ?string, tokens: list<array>, text: string}|null
     */
    public static function argument(array $arguments, int $position, string $name): ?array
    {
        foreach ($arguments as $i => $argument) {
            if ($argument['name'] === $name || ($argument['name'] === null && $i === $position)) {
                return $argument;
            }
        }

        return null;
    }

    /**
     * The value of an argument known without running the code: [true, value], or [false, null]
     * for anything computed at run time (a variable, a call, a concatenation).
     *
     * @param array{tokens: list<array>} $argument
     * @return array{0: bool, 1: mixed}
     */
    public function value(array $argument): array
    {
        $t = $argument['tokens'];
        $sign = 1;
        if (count($t) === 2 && in_array($t[0][0], ['-', '+'], true)) {
            $sign = $t[0][0] === '-' ? -1 : 1;
            $t = [$t[1]];
        }
        if (count($t) === 1) {
            [$id, $text] = $t[0];
            if ($id === T_LNUMBER) {
                return [true, $sign * intval(str_replace('_', '', $text), 0)];
            }
            if ($id === T_DNUMBER) {
                return [true, $sign * (float) str_replace('_', '', $text)];
            }
            if ($id === T_CONSTANT_ENCAPSED_STRING && $sign === 1) {
                $inner = substr($text, 1, -1);

                return [true, $text[0] === "'" ? strtr($inner, ['\\\\' => '\\', "\\'" => "'"]) : stripcslashes($inner)];
            }
            if ($id === T_STRING && in_array(strtolower($text), ['null', 'true', 'false'], true) && $sign === 1) {
                return [true, ['null' => null, 'true' => true, 'false' => false][strtolower($text)]];
            }
        }
        if (count($t) === 3 && $sign === 1 && $t[1][0] === T_DOUBLE_COLON && $t[2][0] === T_STRING
            && in_array($t[0][0], [T_STRING, T_STATIC, T_NAME_QUALIFIED, T_NAME_FULLY_QUALIFIED], true)) {
            return $this->classConstant($this->resolve($t[0][1]), $t[2][1]);
        }

        return [false, null];
    }

    /** @return array{0: bool, 1: mixed} */
    private function classConstant(string $class, string $constant): array
    {
        if ($constant === 'class') {
            return [true, $class];
        }
        $r = $this->class !== null && strcasecmp($class, $this->class->getName()) === 0
            ? $this->class
            : (class_exists($class) || interface_exists($class) ? new \ReflectionClass($class) : null);

        return $r !== null && $r->hasConstant($constant) ? [true, $r->getConstant($constant)] : [false, null];
    }

    /** The arguments of the call whose `(` is token $open: split on its top-level commas. */
    private function arguments(int $open): array
    {
        $arguments = [];
        $current = [];
        $depth = 0;
        for ($i = $open, $n = count($this->tokens); $i < $n; $i++) {
            $id = $this->tokens[$i][0];
            if (in_array($id, ['(', '[', '{', T_CURLY_OPEN, T_DOLLAR_OPEN_CURLY_BRACES, T_ATTRIBUTE], true)) {
                if ($depth++ === 0) {
                    continue;
                }
            } elseif (in_array($id, [')', ']', '}'], true)) {
                if (--$depth === 0) {
                    break;
                }
            } elseif ($id === ',' && $depth === 1) {
                $arguments[] = $current;
                $current = [];
                continue;
            }
            $current[] = $this->tokens[$i];
        }
        if ($current !== []) {
            $arguments[] = $current;
        }

        return array_map(function (array $tokens): array {
            $name = null;
            if (count($tokens) > 2 && $tokens[0][0] === T_STRING && $tokens[1][0] === ':') {
                $name = $tokens[0][1];
                $tokens = array_slice($tokens, 2);
            }

            return ['name' => $name, 'tokens' => $tokens, 'text' => implode('', array_column($tokens, 1))];
        }, $arguments);
    }

    /** The namespace and the `use` imports, read up to the first class-like declaration. */
    private function readHeader(): void
    {
        $names = [T_STRING, T_NAME_QUALIFIED, T_NAME_FULLY_QUALIFIED];
        for ($i = 0, $n = count($this->tokens); $i < $n; $i++) {
            $id = $this->tokens[$i][0];
            if (in_array($id, [T_CLASS, T_TRAIT, T_INTERFACE, T_ENUM], true)) {
                return;
            }
            if ($id === T_NAMESPACE && in_array($this->tokens[$i + 1][0] ?? null, $names, true)) {
                $this->namespace = $this->tokens[$i + 1][1];
            }
            if ($id !== T_USE) {
                continue;
            }
            if (in_array(strtolower($this->tokens[$i + 1][1] ?? ''), ['function', 'const'], true)) {
                continue;   // `use function` / `use const`: not classes
            }
            // use A\B, C as D;   use A\{B, C as D};
            $prefix = '';
            $name = null;
            for ($i++; $i < $n && $this->tokens[$i][0] !== ';'; $i++) {
                [$tid, $text] = $this->tokens[$i];
                if (in_array($tid, $names, true) && $name === null) {
                    $name = $prefix . ltrim($text, '\\');
                } elseif ($tid === T_NS_SEPARATOR && $name !== null) {
                    $prefix = $name . '\\';   // a group's prefix
                    $name = null;
                } elseif ($tid === T_AS) {
                    $alias = $this->tokens[++$i][1] ?? '';
                    $this->imports[strtolower($alias)] = (string) $name;
                    $name = null;
                } elseif ($tid === ',' || $tid === '}') {
                    $this->import($name);
                    $name = null;
                    $prefix = $tid === '}' ? '' : $prefix;
                }
            }
            $this->import($name);
        }
    }

    private function import(?string $name): void
    {
        if ($name !== null && $name !== '') {
            $this->imports[strtolower(substr($name, (int) strrpos('\\' . $name, '\\')))] = $name;
        }
    }
}
